"""The hostile suite (see test_hostile.py) for C++, Java, JavaScript, Go and Rust: each program is
contained, earns nothing it did not earn, leaves the worker pool working, no process behind and
nothing written outside its sandbox; and tricks played on the compiler (a constant expression
that never ends, including ``/dev/random`` or a file of the host) end as compile errors.

Each hostile program is scored against a test it would pass only if its trick worked: the
expected output is a secret from the environment or the host, "connected", or the sum a
program never gets to print. A language's programs are scored in one batch.
"""

import os
from pathlib import Path

import pytest

from rewardlab import Sample
from rewardlab.rewards.code.languages import LANGUAGES
from rewardlab.rewards.code.reward import CodeExecutionReward
from tests.rewards.code.test_hostile import listening_server, sandbox_processes

SECRET = "rewardlab-secret-lang-51c2"
HOST_CANARY = Path("/tmp/rewardlab-hostile-language-canary")
#: Where a program tries to write; none of it may appear on the host.
WRITE_TARGETS = [str(HOST_CANARY), "/usr/canary", "/canary", "/etc/canary", f"{os.getcwd()}/canary"]
#: What a program reads looking for the secret (the environment is read besides).
READ_TARGETS = ["/etc/passwd", "/etc/shadow", "/proc/1/environ", "/proc/self/environ", "/root/.bash_history"]
SUM = {"tests": [{"input": "1 2\n", "output": "3\n"}]}
LEAK = {"tests": [{"input": "", "output": f"{SECRET}\n"}]}


def c_strings(paths):
    return ", ".join(f'"{path}"' for path in paths)


CPP = {
    "fork bomb": ("#include <unistd.h>\nint main(){for(;;) fork();}", SUM),
    "memory bomb": (
        "#include <cstdlib>\n#include <cstring>\n"
        "int main(){for(;;){char*p=(char*)malloc(50<<20); if(p) memset(p,1,50<<20);}}",
        SUM,
    ),
    "infinite loop": ("int main(){volatile unsigned x=0; for(;;) x++;}", SUM),
    "write outside": (
        "#include <cstdio>\nint main(){const char* t[]={" + c_strings(WRITE_TARGETS) + "};"
        'for(auto p:t){FILE*f=fopen(p,"w"); if(f){fputs("pwned",f);fclose(f);}}'
        'long a,b; if(scanf("%ld %ld",&a,&b)==2) printf("%ld\\n",a+b);}',
        SUM,
    ),
    "read the host": (
        "#include <cstdio>\n#include <cstdlib>\n#include <string>\n"
        'int main(){std::string all; const char* e=getenv("REWARDLAB_HOSTILE_SECRET"); if(e) all+=e;'
        "const char* t[]={" + c_strings(READ_TARGETS) + "};"
        'for(auto p:t){FILE*f=fopen(p,"r"); if(!f) continue; int c; while((c=fgetc(f))!=EOF) all+=(char)c;'
        " fclose(f);}"
        f'if(all.find("{SECRET}")!=std::string::npos||all.find("root:")!=std::string::npos) puts("{SECRET}");'
        'else puts("nothing");}',
        LEAK,
    ),
    "network": (
        "#include <cstdio>\n#include <arpa/inet.h>\n#include <sys/socket.h>\n"
        "int main(){int s=socket(AF_INET,SOCK_STREAM,0); sockaddr_in a{}; a.sin_family=AF_INET;"
        "a.sin_port=htons(PORT); a.sin_addr.s_addr=htonl(0x7f000001);"
        f'if(s>=0&&connect(s,(sockaddr*)&a,sizeof a)==0) puts("{SECRET}"); else puts("nothing");}}',
        LEAK,
    ),
    "kill the runner": (
        "#include <cstdio>\n#include <csignal>\n#include <unistd.h>\n"
        "int main(){kill(getppid(),SIGKILL); kill(1,SIGKILL); kill(-1,SIGKILL);"
        'long a,b; if(scanf("%ld %ld",&a,&b)==2) printf("%ld\\n",a+b);}',
        SUM,
    ),
    "fake pass markers": (
        '#include <cstdio>\nint main(){puts("All tests passed!"); puts("PASSED 1/1");}',
        SUM,
    ),
    "stdout flood": (
        "#include <cstdio>\nint main(){static char b[65536]; for(int i=0;i<65536;i++) b[i]='x';"
        "for(;;) fwrite(b,1,sizeof b,stdout);}",
        SUM,
    ),
    "compile: endless constant expression": (
        # Nested: each loop stays under g++'s 262,144 iterations per loop, the whole needs 4e10.
        "constexpr long spin(){long s=0; for(long i=0;i<200000;++i) for(long j=0;j<200000;++j)"
        " s+=i^j; return s;}\n"
        "static_assert(spin()>0);\nint main(){}",
        SUM,
    ),
    "compile: huge template instantiation": (
        "template<int N> struct F { static constexpr long v = F<N-1>::v + F<N-2>::v + F<N-3>::v; };\n"
        "template<> struct F<0> { static constexpr long v = 1; };\n"
        "template<> struct F<-1> { static constexpr long v = 1; };\n"
        "template<> struct F<-2> { static constexpr long v = 1; };\n"
        "template<int N> struct Deep : Deep<N-1> { char pad[N % 7 + 1]; };\n"
        "template<> struct Deep<0> {};\n"
        "int main(){ return (int)(F<880>::v + sizeof(Deep<100000>)); }",
        SUM,
    ),
    "compile: include /dev/random": ("#include </dev/random>\nint main(){}", SUM),
    "compile: include the host's /etc/shadow": ('#include "/etc/shadow"\nint main(){}', SUM),
}

JAVA_MAIN = "import java.io.*;\nimport java.net.*;\nimport java.nio.file.*;\nimport java.util.*;\n"
JAVA = {
    "fork bomb": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) { for (;;) { try {"
        ' new ProcessBuilder("/usr/bin/sh", "-c", "sleep 100").start();'
        " new Thread(() -> { try { Thread.sleep(100000); } catch (Exception e) {} }).start();"
        " } catch (Throwable t) {} } } }",
        SUM,
    ),
    "memory bomb": (
        JAVA_MAIN
        + "public class Main { public static void main(String[] a) { List<byte[]> l = new ArrayList<>();"
        " for (;;) { byte[] b = new byte[50 << 20]; Arrays.fill(b, (byte) 1); l.add(b); } } }",
        SUM,
    ),
    "infinite loop": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) { for (;;) {} } }",
        SUM,
    ),
    "write outside": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) {"
        " for (String p : new String[]{" + c_strings(WRITE_TARGETS) + "}) {"
        ' try { Files.writeString(Path.of(p), "pwned"); } catch (Exception e) {} }'
        " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
        SUM,
    ),
    "read the host": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) {"
        ' String all = String.valueOf(System.getenv("REWARDLAB_HOSTILE_SECRET"));'
        " for (String p : new String[]{" + c_strings(READ_TARGETS) + "}) {"
        " try { all += Files.readString(Path.of(p)); } catch (Exception e) {} }"
        f' System.out.println(all.contains("{SECRET}") || all.contains("root:") ? "{SECRET}" : "nothing");'
        f" }} }}",
        LEAK,
    ),
    "network": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) {"
        f' try (Socket s = new Socket("127.0.0.1", PORT)) {{ System.out.println("{SECRET}"); }}'
        ' catch (Exception e) { System.out.println("nothing"); } } }',
        LEAK,
    ),
    "kill the runner": (
        JAVA_MAIN + "public class Main { public static void main(String[] a) {"
        " ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);"
        " ProcessHandle.of(1).ifPresent(ProcessHandle::destroyForcibly);"
        " ProcessHandle.allProcesses().filter(p -> p.pid() != ProcessHandle.current().pid())"
        ".forEach(ProcessHandle::destroyForcibly);"
        " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
        SUM,
    ),
    "fake pass markers": (
        'public class Main { public static void main(String[] a) { System.out.println("All tests passed!");'
        " } }",
        SUM,
    ),
    "stdout flood": (
        'public class Main { public static void main(String[] a) { String x = "x".repeat(65536);'
        " for (;;) System.out.print(x); } }",
        SUM,
    ),
}

JS = {
    "fork bomb": (
        "const cp = require('child_process');\n"
        "for (;;) { try { cp.spawn(process.execPath, ['-e', 'for(;;){}']); } catch (e) {} }",
        SUM,
    ),
    "memory bomb": ("const l = []; for (;;) l.push(Buffer.alloc(50 << 20, 1));", SUM),
    "infinite loop": ("for (;;) {}", SUM),
    "write outside": (
        "const fs = require('fs');\n"
        f"for (const p of [{c_strings(WRITE_TARGETS)}]) {{ try {{ fs.writeFileSync(p, 'pwned'); }} catch"
        f" (e) {{}} }}\n"
        "const [a, b] = fs.readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number); console.log(a + b);",
        SUM,
    ),
    "read the host": (
        "const fs = require('fs'); let all = String(process.env.REWARDLAB_HOSTILE_SECRET);\n"
        f"for (const p of [{c_strings(READ_TARGETS)}]) {{ try {{ all += fs.readFileSync(p, 'utf8'); }}"
        f" catch (e) {{}} }}\n"
        f"console.log(all.includes('{SECRET}') || all.includes('root:') ? '{SECRET}' : 'nothing');",
        LEAK,
    ),
    "network": (
        "const s = require('net').connect(PORT, '127.0.0.1');\n"
        f"s.on('connect', () => {{ console.log('{SECRET}'); s.destroy(); }});\n"
        "s.on('error', () => console.log('nothing'));",
        LEAK,
    ),
    "kill the runner": (
        "for (const p of [process.ppid, 1, -1]) { try { process.kill(p, 'SIGKILL'); } catch (e) {} }\n"
        "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);"
        " console.log(a + b);",
        SUM,
    ),
    "fake pass markers": ("console.log('All tests passed!'); process.exit(0);", SUM),
    "stdout flood": ("const x = 'x'.repeat(65536); for (;;) process.stdout.write(x);", SUM),
}

GO_IMPORTS = 'import (\n\t"fmt"\n\t"net"\n\t"os"\n\t"strings"\n\t"syscall"\n\t"time"\n)\n'
GO_USE = (
    "var _ = fmt.Sprint\nvar _ = net.Dial\nvar _ = os.Exit\nvar _ = strings.Contains\n"
    "var _ = syscall.Kill\nvar _ = time.Second\n"
)


def go(body):
    return "package main\n" + GO_IMPORTS + GO_USE + "func main() {\n" + body + "\n}\n"


def go_strings(paths):
    return "[]string{" + c_strings(paths) + "}"


GO = {
    "fork bomb": (
        go(
            'for {\n\tsyscall.ForkExec("/proc/self/exe", nil, nil)\n\tgo func() { time.Sleep(time.Hour)'
            " }()\n}"
        ),
        SUM,
    ),
    "memory bomb": (
        go(
            "var l [][]byte\nfor {\n\tb := make([]byte, 50<<20)\n\tfor i := range b {\n\t\tb[i] ="
            " 1\n\t}\n\tl = append(l, b)\n}"
        ),
        SUM,
    ),
    "infinite loop": (go("for {\n}"), SUM),
    "write outside": (
        go(
            f'for _, p := range {go_strings(WRITE_TARGETS)} {{\n\tos.WriteFile(p, []byte("pwned"),'
            f" 0o644)\n}}\n"
            "var a, b int64\nfmt.Scan(&a, &b)\nfmt.Println(a + b)"
        ),
        SUM,
    ),
    "read the host": (
        go(
            'all := os.Getenv("REWARDLAB_HOSTILE_SECRET")\n'
            f"for _, p := range {go_strings(READ_TARGETS)} {{\n\tb, _ := os.ReadFile(p)\n\tall +="
            f" string(b)\n}}\n"
            f'if strings.Contains(all, "{SECRET}") || strings.Contains(all, "root:")'
            f' {{\n\tfmt.Println("{SECRET}")\n'
            '} else {\n\tfmt.Println("nothing")\n}'
        ),
        LEAK,
    ),
    "network": (
        go(
            'c, err := net.DialTimeout("tcp", "127.0.0.1:PORT", time.Second)\n'
            f'if err == nil {{\n\tc.Close()\n\tfmt.Println("{SECRET}")\n}} else'
            f' {{\n\tfmt.Println("nothing")\n}}'
        ),
        LEAK,
    ),
    "kill the runner": (
        go(
            "for _, p := range []int{os.Getppid(), 1, -1} {\n\tsyscall.Kill(p, syscall.SIGKILL)\n}\n"
            "var a, b int64\nfmt.Scan(&a, &b)\nfmt.Println(a + b)"
        ),
        SUM,
    ),
    "fake pass markers": (go('fmt.Println("All tests passed!")'), SUM),
    "stdout flood": (go('x := strings.Repeat("x", 65536)\nfor {\n\tos.Stdout.WriteString(x)\n}'), SUM),
}

RUST_FFI = 'extern "C" { fn fork() -> i32; fn kill(pid: i32, sig: i32) -> i32; fn getppid() -> i32; }\n'
RUST = {
    "fork bomb": (RUST_FFI + "fn main() { loop { unsafe { fork(); } } }", SUM),
    "memory bomb": ("fn main() { let mut l = Vec::new(); loop { l.push(vec![1u8; 50 << 20]); } }", SUM),
    "infinite loop": (
        "fn main() { let mut x = 0u64; loop { x = unsafe { std::ptr::read_volatile(&x) } + 1; } }",
        SUM,
    ),
    "write outside": (
        "use std::io::Read;\nfn main() { for p in [" + c_strings(WRITE_TARGETS) + "] {"
        ' let _ = std::fs::write(p, "pwned"); }'
        " let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap();"
        ' let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect(); println!("{}", v[0]'
        " + v[1]); }",
        SUM,
    ),
    "read the host": (
        'fn main() { let mut all = std::env::var("REWARDLAB_HOSTILE_SECRET").unwrap_or_default();'
        " for p in [" + c_strings(READ_TARGETS) + "] {"
        " if let Ok(t) = std::fs::read_to_string(p) { all += &t; } }"
        f' println!("{{}}", if all.contains("{SECRET}") || all.contains("root:") {{ "{SECRET}" }} else {{'
        f' "nothing" }}); }}',
        LEAK,
    ),
    "network": (
        'fn main() { let a = "127.0.0.1:PORT".parse().unwrap();'
        " match std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(1)) {"
        f' Ok(_) => println!("{SECRET}"), Err(_) => println!("nothing") }} }}',
        LEAK,
    ),
    "kill the runner": (
        RUST_FFI + "use std::io::Read;\nfn main() { unsafe { kill(getppid(), 9); kill(1, 9); kill(-1, 9); }"
        " let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap();"
        ' let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect(); println!("{}", v[0]'
        " + v[1]); }",
        SUM,
    ),
    "fake pass markers": ('fn main() { println!("All tests passed!"); }', SUM),
    "stdout flood": (
        'use std::io::Write;\nfn main() { let x = "x".repeat(65536); let mut o = std::io::stdout();'
        " loop { let _ = o.write_all(x.as_bytes()); } }",
        SUM,
    ),
    "compile: include /dev/zero": (
        'static B: &[u8] = include_bytes!("/dev/zero");\nfn main() { println!("{}", B.len()); }',
        SUM,
    ),
    "compile: include the host's /etc/shadow": (
        'fn main() { print!("{}", include_str!("/etc/shadow")); }',
        SUM,
    ),
}

HOSTILE = {"cpp": CPP, "java": JAVA, "javascript": JS, "go": GO, "rust": RUST}
#: Programs that a correct one would also be: the trick must not matter, and they may pass.
MAY_PASS = {"write outside", "kill the runner"}
#: Programs that must end in a timeout (never print), whatever the language.
MUST_TIME_OUT = {"infinite loop"}


@pytest.fixture(scope="module", params=sorted(HOSTILE))
def hostile_scores(request):
    language = request.param
    os.environ["REWARDLAB_HOSTILE_SECRET"] = SECRET
    server, accepted = listening_server()
    port = server.getsockname()[1]
    reward = CodeExecutionReward(
        language=language, workers=4, test_timeout_s=1.0, total_timeout_s=10.0, compile_timeout_s=4.0
    )
    programs = HOSTILE[language]
    samples = [
        Sample(completion=f"```{language}\n{code.replace('PORT', str(port))}\n```", id=name, fields=fields)
        for name, (code, fields) in programs.items()
    ]
    try:
        scores = dict(zip(programs, reward.score(samples), strict=True))
        correct = LANGUAGES[language]
        healthy = reward.score(
            [Sample(completion=f"```{language}\n{HEALTHY[correct.name]}\n```", fields=SUM)]
        )[0]
    finally:
        reward.close()
        server.close()
        del os.environ["REWARDLAB_HOSTILE_SECRET"]
    yield language, scores, healthy, accepted


HEALTHY = {
    "cpp": '#include <cstdio>\nint main(){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}',
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
    " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);"
    " console.log(a + b);",
    "go": 'package main\nimport "fmt"\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a +'
    " b)\n}",
    "rust": "use std::io::Read;\nfn main() { let mut s = String::new();"
    " std::io::stdin().read_to_string(&mut s)"
    ".unwrap(); let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();"
    ' println!("{}", v[0] + v[1]); }',
}


def test_every_hostile_program_earns_nothing(hostile_scores):
    language, scores, _, _ = hostile_scores
    for name, score in scores.items():
        assert score.ok, f"{language} {name}: the harness itself failed: {score.reason}"
        if name not in MAY_PASS:
            assert score.value == 0.0, f"{language} {name} earned {score.value}: {score.details.get('tests')}"


def test_compiler_tricks_end_as_compile_errors(hostile_scores):
    language, scores, _, _ = hostile_scores
    tricks = [name for name in scores if name.startswith("compile:")]
    assert tricks or language not in ("cpp", "rust")
    for name in tricks:
        load_error = scores[name].details.get("load_error") or ""
        assert load_error.startswith("compile_error: "), (language, name, scores[name].details)
        # Nothing of the host's files reached the reason: the sandbox has no /etc/shadow.
        assert "root:" not in load_error


def test_endless_programs_time_out_and_floods_are_cut(hostile_scores):
    language, scores, _, _ = hostile_scores
    outcome = lambda name: {test["outcome"] for test in scores[name].details["tests"]}  # noqa: E731
    for name in MUST_TIME_OUT:
        assert outcome(name) == {"timeout"}, (language, name, scores[name].details["tests"])
    assert outcome("fork bomb") <= {"timeout", "error"}, scores["fork bomb"].details["tests"]
    flood = scores["stdout flood"].details["tests"][0]
    assert flood["outcome"] == "timeout" or flood["reason"] == "output exceeded the size limit", flood


def test_nothing_was_written_outside_and_no_connection_reached_the_host(hostile_scores):
    _, _, _, accepted = hostile_scores
    assert accepted == []
    for target in WRITE_TARGETS:
        assert not Path(target).exists(), target


def test_the_pool_still_works_and_no_sandbox_process_survives(hostile_scores):
    language, _, healthy, _ = hostile_scores
    assert healthy.value == 1.0, (language, healthy.reason)
    assert sandbox_processes() == []


def test_the_secret_is_where_a_program_would_look_for_it():
    # The tests above would prove nothing if the secret could not be found outside the sandbox.
    assert Path("/etc/passwd").read_text().count("root:") >= 1
