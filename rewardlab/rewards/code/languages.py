"""Compiled and interpreted languages besides Python: how each is built and run in the sandbox.

Every language runs in the same sandbox and through the same runner as Python (see `sandbox`
and `python_runner`): the relay's ``compile`` op runs the compiler in a fresh child of the
sandbox, with its own time limit (`CodeExecutionOptions.compile_timeout_s`), the sandbox's
memory and process limits, and a bound on what it may leave (`python_runner.MAX_ARTIFACT_BYTES`);
the relay's ``exec`` op runs the built program on one test's input, as ``script`` runs a Python
one. Tests stay outside: the trusted side compares what a program printed (see `harness`).

What a compiler leaves comes back to the trusted side, which keeps it by a hash of the language,
the compiler's command line and the source (`harness`), for every later test of the program and
every later sample with the same source; each test writes it into a freshly emptied sandbox. So
a program cannot change the binary that later tests or samples run: the copy they get was never
within its reach.

The toolchains are Debian's, under ``/usr`` (the only host directory the sandbox shows, besides
the JDK's configuration): ``g++`` (g++-12), ``openjdk-17-jdk-headless``, ``nodejs``,
``golang-go`` (1.19, whose standard library ships compiled, so a build needs no network and no
warm cache; cgo stays on, as that library was built with it: with ``CGO_ENABLED=0`` the build
recompiles ``net`` and more, five seconds a program) and ``rustc`` (1.63). A rustup install
under ``/root/.cargo`` is not used: no other user may read it. Each tool is found by its real
path (``/usr/bin/java`` is a link into ``/etc/alternatives``, which the sandbox does not show).

Limits per language, set deliberately (see `LANGUAGES`):

- C++, Rust, JavaScript: the default `SandboxLimits` (1 GiB of address space, 32 processes).
  Node reserves its heap lazily and fits; a program that needs more fails as it would on a judge.
  JavaScript is checked (``node --check``) rather than compiled, so a syntax error is reported
  as a compile error.
- Java: the JVM reserves its whole heap, its code cache, its class space and every thread's
  stack up front, as address space (``RLIMIT_AS`` counts reservations, not use), and starts a
  dozen threads, which ``RLIMIT_NPROC`` counts as processes. With the default 1 GiB limit it
  cannot start with a compressed class space of 1 GiB (its default). So the JVM runs with its
  reservations bounded by flags (heap 512 MiB, class space 64 MiB, code cache 64 MiB, serial
  GC, one JIT thread, a 64 MiB thread stack for deep recursion) under 3 GiB of address space and
  64 processes; javac runs with the same flags but its default stacks. The 3 GiB is also the
  memory cgroup's limit for the whole sandbox, where one is made (`SandboxLimits.memory_bytes`
  is both); what the program itself may hold is the heap's 512 MiB and what native memory its
  threads use.
- Go: the runtime starts a thread per ``GOMAXPROCS`` and more for blocking calls, and ``go
  build`` runs the compiler and linker as processes of their own: 64 processes, and
  ``GOMAXPROCS=2`` for the build and the program alike, so the thread count does not follow the
  host's CPU count.

Function-call tests (`cases.CallTests`) run for C++ and JavaScript through a harness around
the program (see `Language.with_call_harness`): it reads the arguments as a JSON array on stdin,
calls the named function (a free function, or a method of a ``Solution`` class) and prints the
return value as JSON on its last line, which the trusted side reads and compares
(`outputs.call_output_matches`). It calls only what the program itself defines, as Python's
runner does: a JavaScript global (``btoa``, ``escape``) or a C library function (``abs``,
``toupper``) of that name made a program that defined nothing pass (red-team round 24).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from rewardlab.errors import SandboxUnavailable
from rewardlab.rewards.code.sandbox import SandboxLimits

_DEFAULT_LIMITS = SandboxLimits()
#: Where a compiler writes what it builds, under the program's scratch directory.
BUILD = "build"

_JVM_FLAGS = (
    "-Xmx512m",
    "-Xss64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:MaxMetaspaceSize=256m",
    "-Xshare:auto",
)
#: javac runs on the same JVM flags, with its default thread stacks (it starts a dozen threads).
_JAVAC_FLAGS = tuple(f"-J{flag}" for flag in _JVM_FLAGS if not flag.startswith("-Xss"))
_JAVA_CLASS = re.compile(r"\bclass\s+([A-Za-z_$][A-Za-z0-9_$]*)")
_JAVA_MODIFIERS = frozenset({"public", "final", "abstract", "static", "strictfp", "sealed", "non-sealed"})
#: An annotation, with arguments holding one level of parentheses and any braces (an array:
#: ``@SuppressWarnings({"unchecked", "rawtypes"})``, red-team round 24b).
_JAVA_ANNOTATION = re.compile(r"@[\w.]+\s*(?:\((?:[^()]|\([^()]*\))*\))?")
_SOLUTION_CLASS = re.compile(r"\b(?:class|struct)\s+Solution\b")
#: Comments, and string and character literals (C++ raw strings and Java text blocks too): what
#: the class lookups must not read (see `code_only`). A number is matched whole (group
#: ``number``, kept as it is), so that a quote within one is a C++14 digit separator
#: (``1'000'000``, ``0xFF'FF``), and every other quote starts a character literal: a quote after
#: a keyword (``case'{':``, ``return'}';``, valid C++ and Java) is one (red-team round 24b).
_NOT_CODE = re.compile(
    r"(?P<number>(?<![\w.$])[0-9](?:[eEpP][+-]|'?[\w.])*)"
    r"|//[^\n]*|/\*.*?(?:\*/|\Z)"
    r'|\b(?:u8|[uUL])?R"([^()\\ \n]{0,16})\(.*?(?:\)\2"|\Z)'
    r'|""".*?(?:"""|\Z)'
    r'|"(?:\\.|[^"\\\n])*"?'
    r"|'(?:\\.|[^'\\\n])*'?",
    re.DOTALL,
)


def code_only(source: str) -> str:
    """``source`` with its comments and string and character literals blanked (newlines kept),
    so that a lookup of the program's classes reads only code: ``// not a class Solution`` in a
    comment, or ``"struct Solution"`` in a string, sent the C++ harness to a class that did not
    exist, and a comment naming a public class named the Java file after it (red-team round
    24). One regular expression, scanned left to right, so a quote in a comment or ``//`` in a
    string cannot start the other; linear in the source (each alternative ends at its first
    possible end, or the end of the text)."""
    return _NOT_CODE.sub(
        lambda found: found.group() if found.group("number") else re.sub(r"[^\n]", " ", found.group()), source
    )


def _java_main_class(source: str) -> str | None:
    """The public top-level class of a Java program, or None: a class declared at brace depth 0
    with ``public`` among its modifiers, in the program's code only (see `code_only`). A nested
    ``public final class Node`` is not the one ``java`` runs (red-team round 24)."""
    code = code_only(source)
    depth, position = 0, 0
    for found in _JAVA_CLASS.finditer(code):
        depth += code.count("{", position, found.start()) - code.count("}", position, found.start())
        position = found.start()
        if depth != 0:
            continue
        # The words before ``class`` since the last declaration ended, within a bounded window
        # (so a source of many ``class`` words stays linear): modifiers and annotations only.
        window = code[max(0, found.start() - 512) : found.start()]
        # Annotations go first: an array argument's braces are not a declaration's end.
        words = re.split(r"[;{}]", _JAVA_ANNOTATION.sub(" ", window))[-1].split()
        if "public" in words and all(word in _JAVA_MODIFIERS for word in words):
            return found.group(1)
    return None


_CPP_CALL_HARNESS = r"""
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
namespace rewardlab_harness {
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
};
struct Parser {
  const std::string &in;
  size_t at = 0;
  [[noreturn]] void fail() { throw std::runtime_error("bad JSON arguments"); }
  void space() { while (at < in.size() && std::isspace((unsigned char)in[at])) ++at; }
  bool eat(char c) { space(); if (at < in.size() && in[at] == c) { ++at; return true; } return false; }
  std::string string() {
    if (!eat('"')) fail();
    std::string out;
    while (at < in.size() && in[at] != '"') {
      char c = in[at++];
      if (c != '\\') { out += c; continue; }
      if (at >= in.size()) fail();
      char e = in[at++];
      if (e == 'n') out += '\n'; else if (e == 't') out += '\t'; else if (e == 'r') out += '\r';
      else if (e == 'b') out += '\b'; else if (e == 'f') out += '\f';
      else if (e == 'u') {
        if (at + 4 > in.size()) fail();
        unsigned code = std::stoul(in.substr(at, 4), nullptr, 16); at += 4;
        if (code < 0x80) out += char(code);
        else if (code < 0x800) { out += char(0xC0 | (code >> 6)); out += char(0x80 | (code & 0x3F)); }
        else {
          out += char(0xE0 | (code >> 12));
          out += char(0x80 | ((code >> 6) & 0x3F));
          out += char(0x80 | (code & 0x3F));
        }
      } else out += e;
    }
    if (!eat('"')) fail();
    return out;
  }
  Json value(int depth) {
    if (depth > 64) fail();
    space();
    Json j;
    if (at >= in.size()) fail();
    char c = in[at];
    if (c == '[') {
      ++at; j.kind = Json::Array;
      if (eat(']')) return j;
      do j.items.push_back(value(depth + 1)); while (eat(','));
      if (!eat(']')) fail();
    } else if (c == '{') {
      ++at; j.kind = Json::Object;
      if (eat('}')) return j;
      do {
        std::string k = string();
        if (!eat(':')) fail();
        j.members.emplace_back(k, value(depth + 1));
      } while (eat(','));
      if (!eat('}')) fail();
    } else if (c == '"') { j.kind = Json::String; j.text = string(); }
    else if (in.compare(at, 4, "true") == 0) { at += 4; j.kind = Json::Bool; j.boolean = true; }
    else if (in.compare(at, 5, "false") == 0) { at += 5; j.kind = Json::Bool; }
    else if (in.compare(at, 4, "null") == 0) { at += 4; }
    else {
      size_t start = at;
      while (at < in.size() && std::string("+-0123456789.eE").find(in[at]) != std::string::npos) ++at;
      if (at == start) fail();
      j.kind = Json::Number; j.text = in.substr(start, at - start);
    }
    return j;
  }
};
template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T> struct is_pair : std::false_type {};
template <class A, class B> struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T> struct is_string_map : std::false_type {};
template <class V, class C, class A> struct is_string_map<std::map<std::string, V, C, A>> : std::true_type {};
template <class T> void read(const Json &j, T &out) {
  if constexpr (std::is_same_v<T, bool>) out = j.boolean;
  else if constexpr (std::is_same_v<T, char>) out = j.text.empty() ? '\0' : j.text[0];
  else if constexpr (std::is_integral_v<T>) out = (T)std::stoll(j.text);
  else if constexpr (std::is_floating_point_v<T>) out = (T)std::stold(j.text);
  else if constexpr (std::is_same_v<T, std::string>) out = j.text;
  else if constexpr (is_vector<T>::value) {
    out.clear();
    for (const Json &item : j.items) {
      typename T::value_type v{};
      read(item, v);
      out.push_back(std::move(v));
    }
  } else if constexpr (is_pair<T>::value) {
    if (j.items.size() != 2) throw std::runtime_error("bad pair");
    read(j.items[0], out.first);
    read(j.items[1], out.second);
  } else if constexpr (is_string_map<T>::value) {
    for (const auto &m : j.members) read(m.second, out[m.first]);
  }
  else static_assert(sizeof(T) == 0, "rewardlab: an argument type the call harness cannot read");
}
inline void write_string(std::ostream &os, const std::string &s) {
  os << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') os << '\\' << c;
    else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); os << buf; }
    else os << c;
  }
  os << '"';
}
template <class T> void write(std::ostream &os, const T &v) {
  if constexpr (std::is_same_v<T, bool>) os << (v ? "true" : "false");
  else if constexpr (std::is_same_v<T, char>) write_string(os, std::string(1, v));
  else if constexpr (std::is_integral_v<T>) os << +v;
  else if constexpr (std::is_floating_point_v<T>) {
    if (v != v || v - v != 0) { os << "null"; return; }
    std::ostringstream t;
    t.precision(17);
    t << (long double)v;
    os << t.str();
  }
  else if constexpr (std::is_convertible_v<const T &, std::string>) write_string(os, std::string(v));
  else if constexpr (is_pair<T>::value) {
    os << '[';
    write(os, v.first);
    os << ',';
    write(os, v.second);
    os << ']';
  } else if constexpr (is_string_map<T>::value) {
    os << '{';
    bool first = true;
    for (const auto &m : v) {
      if (!first) os << ',';
      first = false;
      write_string(os, m.first);
      os << ':';
      write(os, m.second);
    }
    os << '}';
  } else {
    os << '[';
    bool first = true;
    for (const auto &item : v) { if (!first) os << ','; first = false; write(os, item); }
    os << ']';
  }
}
template <class Tuple, size_t... I> void fill(const Json &args, Tuple &t, std::index_sequence<I...>) {
  if (args.items.size() != sizeof...(I)) throw std::runtime_error("wrong number of arguments");
  (read(args.items[I], std::get<I>(t)), ...);
}
template <class R, class Call, class... A> void invoke(const Json &args, Call call) {
  std::tuple<std::decay_t<A>...> values;
  fill(args, values, std::index_sequence_for<A...>{});
  std::ostringstream out;
  if constexpr (std::is_void_v<R>) { std::apply(call, values); out << "null"; }
  else write(out, std::apply(call, values));
  std::cout << std::flush << '\n' << out.str() << '\n' << std::flush;
}
template <class R, class... A> void run(R (*f)(A...), const Json &args) {
  invoke<R, decltype(f), A...>(args, f);
}
template <class C, class R, class... A> void run(R (C::*f)(A...), const Json &args) {
  C object;
  auto call = [&](std::decay_t<A> &...a) -> R { return (object.*f)(a...); };
  invoke<R, decltype(call), A...>(args, call);
}
template <class C, class R, class... A> void run(R (C::*f)(A...) const, const Json &args) {
  C object;
  auto call = [&](std::decay_t<A> &...a) -> R { return (object.*f)(a...); };
  invoke<R, decltype(call), A...>(args, call);
}
}  // namespace rewardlab_harness
// The bounds of this executable's code, from the GNU linkers' default script (ld, gold and lld
// all define them): a function the program defines lies between them, the C library's abs or
// toupper, which its headers declare in the global namespace, in a shared library elsewhere
// (g++ builds position-independent executables by default, where taking a library function's
// address gives its address in the library, not a stub in the executable).
extern "C" char __executable_start, etext;
namespace rewardlab_harness {
template <class F> bool in_program(F f) {
  const char *code = reinterpret_cast<const char *>(f);
  return code >= &__executable_start && code < &etext;
}
template <class T> struct member_of {};
template <class C, class R, class... A> struct member_of<R (C::*)(A...)> { using type = C; };
template <class C, class R, class... A> struct member_of<R (C::*)(A...) const> { using type = C; };
template <class C, class R, class... A> struct member_of<R (C::*)(A...) noexcept> { using type = C; };
template <class C, class R, class... A> struct member_of<R (C::*)(A...) const noexcept> { using type = C; };
template <class Owner, class F> void serve(F f, const char *name) {
  if constexpr (std::is_member_function_pointer_v<F>) {
    static_assert(std::is_same_v<typename member_of<F>::type, Owner>,
                  "rewardlab: the called method must be declared by Solution itself");
  } else if (!in_program(f)) {
    std::cerr << "no function named '" << name << "' in the program\n";
    std::exit(1);
  }
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  Parser parser{input};
  Json args = parser.value(0);
  run(f, args);
}
}  // namespace rewardlab_harness
"""

# After the program: as few tokens as possible, none that a competitive programmer's macros
# redefine (``#define int long long`` made ``int main`` a ``long long main``).
_CPP_CALL_STUB = """
signed main() {
  rewardlab_harness::serve<__REWARDLAB_OWNER__>(&__REWARDLAB_FUNCTION__, "__REWARDLAB_NAME__");
}
"""

# Every name it declares is ``__rewardlab_``-prefixed: a ``const solution`` (or ``target``,
# ``method``, ``own``, ``args``) of the harness shadowed the program's function of that name, and
# ``typeof`` of it threw in its temporal dead zone (red-team round 24b). ``fs`` comes from
# ``process.getBuiltinModule`` (node >= 20.16), which an ES module has too: node runs a program
# with ``import`` or ``export`` as one, where ``require`` is not defined. An error the call
# throws is written with its first line last, so that the tail of stderr the runner keeps, and
# the failure reason, name it (see `harness._exit_reason`).
_JS_CALL_HARNESS = r"""
;(function () {
  const __rewardlab_fs = typeof process.getBuiltinModule === "function"
    ? process.getBuiltinModule("fs") : require("fs");
  const __rewardlab_args = JSON.parse(__rewardlab_fs.readFileSync(0, "utf8"));
  // Only the program's own function: a top-level declaration of a script run by node is the
  // module's, never globalThis's, so a function that is globalThis's property is a built-in
  // (btoa, escape) the program did not write. Then a method of Solution, not Object's.
  const __rewardlab_own = typeof __NAME__ === "function" && globalThis["__NAME__"] !== __NAME__
    ? __NAME__ : null;
  const __rewardlab_solution = typeof Solution === "function" ? new Solution() : null;
  const __rewardlab_method = __rewardlab_solution && typeof __rewardlab_solution.__NAME__ === "function" &&
    __rewardlab_solution.__NAME__ !== Object.prototype["__NAME__"]
    ? __rewardlab_solution.__NAME__.bind(__rewardlab_solution) : null;
  const __rewardlab_target = __rewardlab_own || __rewardlab_method;
  if (typeof __rewardlab_target !== "function") {
    process.stderr.write("no function named '__NAME__' in the program\n");
    process.exit(1);
  }
  const __rewardlab_fail = (error) => {
    const text = error instanceof Error && typeof error.stack === "string" ? error.stack : String(error);
    const first = error instanceof Error ? String(error) : "Uncaught " + String(error);
    process.stderr.write(text + "\n" + first + "\n");
    process.exit(1);
  };
  let __rewardlab_value;
  try {
    __rewardlab_value = __rewardlab_target(...__rewardlab_args);
  } catch (error) {
    __rewardlab_fail(error);
  }
  Promise.resolve(__rewardlab_value).then((value) => {
    process.stdout.write("\n" + JSON.stringify(value === undefined ? null : value) + "\n");
  }, __rewardlab_fail);
})();
"""


#: What g++ says when the stub's ``&::name`` (or ``&Solution::name``) is an overload set, and the
#: name the stub asked for (at the source's end, where `with_call_harness` puts the stub).
_OVERLOADED_CALL = re.compile(r"serve<(\w+)>\(<unresolved overloaded function type>")
_STUB_NAME = re.compile(r"serve<\w+>\(&(?:Solution)?::([A-Za-z_$][A-Za-z0-9_$]*),")


def overloaded_call(compiler_error: str, source: str) -> str | None:
    """Why a C++ call-tested program did not compile when the function it names is overloaded:
    the stub takes the function's address with no target type, so two functions of that name,
    the program's own (a recursive helper ``sum(v)`` / ``sum(v, i)``) or one a header of the
    harness declares (``<cstdio>``'s ``remove``, ``<cstdlib>``'s ``div``), leave g++ to report an
    ``<unresolved overloaded function type>`` in the harness's code (red-team round 24b).
    None for any other compile error. Choosing among the overloads would need the argument
    types, which only the chosen overload gives; so the reason says what to change."""
    found = _OVERLOADED_CALL.search(compiler_error)
    if found is None:
        return None
    names = _STUB_NAME.findall(source[-512:])
    name = names[-1] if names else "?"
    if found.group(1) == "Solution":
        where = "Solution has more than one method of that name"
    else:
        where = (
            "there is more than one function of that name (the program's own, or a C library function"
            " that the harness's headers declare, like remove or div)"
        )
    return f"fn_name {name!r} is overloaded: {where}; a C++ call test needs exactly one"


@dataclass(frozen=True, slots=True)
class Language:
    """How one language's programs are built and run in the sandbox.

    ``compile`` and ``run`` are command lines whose first word is a tool name, resolved to its
    real path under ``/usr`` by `command`; ``{source}`` stands for the source file's name and
    ``{main}`` for the name of the program's main class (Java). With ``runs_source``, the
    "compiler" only checks the source (``node --check``: a syntax error is then a compile error,
    reported whole), and the source is what runs.
    """

    name: str
    #: Info strings of fenced blocks in this language (the empty one: an untagged block).
    tags: tuple[str, ...]
    source: str
    compile: tuple[str, ...]
    run: tuple[str, ...]
    limits: SandboxLimits = _DEFAULT_LIMITS
    env: tuple[tuple[str, str], ...] = ()
    #: Host directories outside /usr the toolchain reads (see `Sandbox.read_only`).
    read_only: tuple[str, ...] = ()
    #: The function-call harness (after the program for JavaScript, before it for C++, see
    #: `with_call_harness`), or None where calls are not supported.
    call_harness: str | None = None
    #: The compiler only checks the source, which is what runs (``node --check``).
    runs_source: bool = False
    #: Debian packages that provide the tools, for the error when one is missing.
    packages: tuple[str, ...] = ()

    def source_name(self, source: str) -> str:
        """The file the source is written to; a Java file is named after its public class."""
        return self.source.format(main=self.main_class(source))

    def main_class(self, source: str) -> str:
        """The class ``java`` runs: the public top-level class, else ``Main`` (what judges
        expect); read from the code, not its comments and strings (see `_java_main_class`)."""
        return _java_main_class(source) or "Main"

    def with_call_harness(self, source: str, function: str) -> str:
        """The program with the harness that calls ``function`` (see the module docstring)."""
        if self.call_harness is None:
            raise ValueError(f"{self.name} programs have no function-call harness")
        if not re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", function):
            raise ValueError(f"not a function name: {function!r}")
        if self.name == "cpp":
            # ::name, not name: with ``using namespace std`` a program's ``unique`` would be
            # ambiguous with std::unique; qualified lookup finds the global one first. That
            # also finds the C library's ``abs`` or ``toupper`` in a program that defines none:
            # the harness calls a free function only when its code is in the executable, and a
            # method only when Solution itself declares it (red-team round 24).
            # The harness's own code comes first, so that no macro of the program
            # (``#define int long long``) reaches it, and ``#line 1`` keeps the compiler's
            # line numbers the program's; only the short stub that calls it follows.
            solution = _SOLUTION_CLASS.search(code_only(source)) is not None
            stub = (
                _CPP_CALL_STUB.replace("__REWARDLAB_OWNER__", "Solution" if solution else "void")
                .replace("__REWARDLAB_FUNCTION__", f"Solution::{function}" if solution else f"::{function}")
                .replace("__REWARDLAB_NAME__", function)
            )
            return self.call_harness + "#line 1\n" + source + "\n" + stub
        return source + "\n" + self.call_harness.replace("__NAME__", function)

    def command(self, words: tuple[str, ...], source: str) -> list[str]:
        """``compile`` or ``run`` for ``source``, with the tool's real path and names filled in."""
        values = {"source": self.source_name(source), "main": self.main_class(source)}
        first = words[0] if words[0].startswith("./") else _tool(words[0])
        return [first, *(word.format(**values) for word in words[1:])]

    def environment(self) -> dict[str, str]:
        """The whole environment of the compiler and the program (``{workdir}``: see `python_runner`)."""
        return {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "{workdir}", **dict(self.env)}

    def check(self) -> None:
        """Fail with the install command when a tool is missing or unreadable."""
        for words in (self.compile, self.run):
            if not words[0].startswith("./"):
                try:
                    _tool(words[0])
                except SandboxUnavailable as error:
                    raise SandboxUnavailable(
                        f"{error}; install it with: apt-get install -y {' '.join(self.packages)}"
                    ) from None
        for path in self.read_only:
            if not os.path.isdir(path):
                raise SandboxUnavailable(f"{self.name} needs {path}; install: {' '.join(self.packages)}")


def _tool(name: str) -> str:
    """``name``'s real path, which must be under ``/usr`` and runnable by every user (the sandbox
    shows nothing else, and runs as an unprivileged user)."""
    found = shutil.which(name, path="/usr/bin")
    real = os.path.realpath(found) if found else None
    if real is None or not real.startswith("/usr/") or not os.stat(real).st_mode & 0o001:
        raise SandboxUnavailable(f"{name} is not installed under /usr for every user to run")
    return real


def _java_configuration() -> tuple[str, ...]:
    """The JDK's configuration directory in /etc, which its ``conf`` links into (Debian:
    ``/etc/java-17-openjdk``); none where java is missing or keeps it under /usr."""
    java = shutil.which("java", path="/usr/bin")
    if java is None:
        return ()
    home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    security = os.path.realpath(os.path.join(home, "conf", "security", "java.security"))
    if security.startswith("/usr/") or not os.path.isfile(security):
        return ()
    return (os.path.dirname(os.path.dirname(security)),)


_JVM_LIMITS = SandboxLimits(memory_bytes=3 << 30, processes=64)
_GO_LIMITS = SandboxLimits(processes=64)

LANGUAGES: dict[str, Language] = {
    "cpp": Language(
        "cpp",
        ("cpp", "c++", "cxx", "cc", ""),
        "main.cpp",
        ("g++", "-std=gnu++17", "-O2", "-pipe", "-o", f"{BUILD}/main", "{source}"),
        (f"./{BUILD}/main",),
        call_harness=_CPP_CALL_HARNESS,
        packages=("g++",),
    ),
    "java": Language(
        "java",
        ("java", ""),
        "{main}.java",
        ("javac", *_JAVAC_FLAGS, "-encoding", "UTF-8", "-d", BUILD, "{source}"),
        ("java", *_JVM_FLAGS, "-cp", BUILD, "{main}"),
        limits=_JVM_LIMITS,
        read_only=_java_configuration(),
        packages=("openjdk-17-jdk-headless",),
    ),
    "javascript": Language(
        "javascript",
        ("javascript", "js", "node", "nodejs", ""),
        "main.js",
        ("node", "--check", "{source}"),
        ("node", "main.js"),
        runs_source=True,
        call_harness=_JS_CALL_HARNESS,
        packages=("nodejs",),
    ),
    "go": Language(
        "go",
        ("go", "golang", ""),
        "main.go",
        ("go", "build", "-p", "1", "-o", f"{BUILD}/main", "{source}"),
        (f"./{BUILD}/main",),
        limits=_GO_LIMITS,
        env=(
            ("GOCACHE", "{workdir}/.cache/go"),
            ("GOPATH", "{workdir}/.go"),
            ("GO111MODULE", "off"),
            ("GOMAXPROCS", "2"),
        ),
        packages=("golang-go",),
    ),
    "rust": Language(
        "rust",
        ("rust", "rs", ""),
        "main.rs",
        (
            "rustc", "--edition", "2021", "-O", "-C", "linker=gcc", "-C", "strip=symbols",
            "-o", f"{BUILD}/main", "{source}",
        ),
        (f"./{BUILD}/main",),
        packages=("rustc",),
    ),
}  # fmt: skip
