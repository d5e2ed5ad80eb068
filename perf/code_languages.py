"""Programs per second for C++, Java, JavaScript, Go and Rust: sandboxed against a naive baseline.

Workload per language: ``--programs`` distinct programs (the same solution, each with its own
comment, so that no build is shared), each with ``--tests`` stdin/stdout tests (sum, maximum and
median of up to 50 numbers).

Baseline, measured in the same process: for every program, a plain ``subprocess.run`` of the
compiler into a temporary directory, then one ``subprocess.run`` of the program per test, one
after another, with no isolation, no limits and nothing cached (``javac`` then ``java``; ``go
build``; ``node`` runs the source).

rewardlab: `CodeExecutionReward(language=...)`, bwrap isolation, an unprivileged user, rlimits
and a memory cgroup where one can be made, its worker pool started first (as after a first
training step): each program compiled once in the sandbox, then each test run there as an
executable in a fresh child.

Run:  python perf/code_languages.py [--programs 8] [--tests 5] [--languages cpp java ...]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time

from rewardlab import Sample
from rewardlab.rewards.code.languages import LANGUAGES
from rewardlab.rewards.code.reward import CodeExecutionReward

PROGRAMS = {
    "cpp": "#include <bits/stdc++.h>\nint main(){std::vector<long long> v; long long x;"
    " while(std::cin>>x) v.push_back(x); std::sort(v.begin(), v.end());"
    " std::cout<<std::accumulate(v.begin(), v.end(), 0LL)<<' '<<v.back()<<' '<<v[v.size()/2]<<'\\n';}",
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
    " Scanner s = new Scanner(System.in); List<Long> v = new ArrayList<>(); while (s.hasNextLong())"
    " v.add(s.nextLong());"
    " Collections.sort(v); long t = 0; for (long x : v) t += x;"
    ' System.out.println(t + " " + v.get(v.size() - 1) + " " + v.get(v.size() / 2)); } }',
    "javascript": "const v = require('fs').readFileSync(0,"
    " 'utf8').trim().split(/\\s+/).map(Number).sort((a, b) => a - b);\n"
    "console.log(`${v.reduce((a, b) => a + b, 0)} ${v[v.length - 1]} ${v[v.length >> 1]}`);",
    "go": 'package main\nimport (\n\t"fmt"\n\t"sort"\n)\nfunc main() {\n\tvar v []int\n\tvar x int\n'
    "\tfor {\n\t\tif _, err := fmt.Scan(&x); err != nil {\n\t\t\tbreak\n\t\t}\n\t\tv = append(v, x)\n\t}\n"
    "\tsort.Ints(v)\n\tt := 0\n\tfor _, y := range v {\n\t\tt += y\n\t}\n"
    "\tfmt.Println(t, v[len(v)-1], v[len(v)/2])\n}",
    "rust": "use std::io::Read;\nfn main() { let mut s = String::new();"
    " std::io::stdin().read_to_string(&mut s).unwrap();"
    " let mut v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect(); v.sort();"
    ' println!("{} {} {}", v.iter().sum::<i64>(), v[v.len() - 1], v[v.len() / 2]); }',
}
#: How the baseline compiles (into the current directory) and runs each language.
BASELINE = {
    "cpp": (["/usr/bin/g++", "-std=gnu++17", "-O2", "-o", "main", "main.cpp"], ["./main"]),
    "java": (["/usr/bin/javac", "-d", ".", "Main.java"], ["/usr/bin/java", "-cp", ".", "Main"]),
    "javascript": (None, ["/usr/bin/node", "main.js"]),
    "go": (["/usr/bin/go", "build", "-o", "main", "main.go"], ["./main"]),
    "rust": (["/usr/bin/rustc", "-O", "-o", "main", "main.rs"], ["./main"]),
}


def workload(language: str, programs: int, tests: int, seed: int = 0, tag: str = "") -> list[Sample]:
    generator = random.Random(seed)
    samples = []
    for index in range(programs):
        cases = []
        for _ in range(tests):
            numbers = [generator.randint(-1000, 1000) for _ in range(generator.randint(1, 50))]
            ordered = sorted(numbers)
            cases.append(
                {
                    "input": " ".join(map(str, numbers)),
                    "output": f"{sum(numbers)} {ordered[-1]} {ordered[len(ordered) // 2]}",
                }
            )
        source = f"// {tag}program {index}\n{PROGRAMS[language]}"
        samples.append(
            Sample(
                completion=f"```{language}\n{source}\n```", id=f"{language}-{index}", fields={"tests": cases}
            )
        )
    return samples


def source_of(sample: Sample) -> str:
    return sample.completion_text.split("\n", 1)[1].rsplit("```", 1)[0]


def run_baseline(language: str, samples: list[Sample]) -> float:
    compile_command, run_command = BASELINE[language]
    started = time.perf_counter()
    for sample in samples:
        with tempfile.TemporaryDirectory() as directory:
            # Go's build cache starts empty for every program, as nothing else is cached either.
            environment = {**os.environ, "GOCACHE": os.path.join(directory, ".cache"), "GO111MODULE": "off"}
            name = LANGUAGES[language].source_name(source_of(sample))
            with open(os.path.join(directory, name), "w") as handle:
                handle.write(source_of(sample))
            if compile_command is not None:
                subprocess.run(
                    compile_command, cwd=directory, check=True, capture_output=True, env=environment
                )
            for case in sample.fields["tests"]:
                result = subprocess.run(
                    run_command,
                    cwd=directory,
                    input=case["input"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                assert result.stdout.split() == case["output"].split(), (result.stdout, case["output"])
    return time.perf_counter() - started


def run_rewardlab(reward: CodeExecutionReward, samples: list[Sample]) -> float:
    started = time.perf_counter()
    scores = reward.score(samples)
    elapsed = time.perf_counter() - started
    failed = [score for score in scores if score.value != 1.0]
    assert not failed, failed[0]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=8)
    parser.add_argument("--tests", type=int, default=5)
    parser.add_argument("--languages", nargs="+", default=sorted(LANGUAGES), choices=sorted(LANGUAGES))
    args = parser.parse_args()
    print(f"{'language':>10} | {'baseline (naive)':>17} | {'rewardlab (sandboxed)':>22} | ratio")
    for language in args.languages:
        reward = CodeExecutionReward(language=language, test_timeout_s=10.0, total_timeout_s=60.0)
        run_rewardlab(reward, workload(language, 2, 1, tag="warm-up "))  # start the workers
        samples = workload(language, args.programs, args.tests)
        base_time = run_baseline(language, samples)
        our_time = run_rewardlab(reward, samples)
        reward.close()
        print(
            f"{language:>10} | {len(samples) / base_time:7.2f} programs/s | {len(samples) / our_time:8.2f}"
            f" programs/s "
            f"| {base_time / our_time:5.2f}x"
        )
    print(
        f"{os.cpu_count()} CPUs; {args.programs} programs x {args.tests} tests per language; the baseline "
        "compiles and runs unsandboxed, one program after another"
    )


if __name__ == "__main__":
    main()
