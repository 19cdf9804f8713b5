"""The judge's language table: how each language is compiled and run inside the sandbox.

Python runs in a child forked from the submission's warm runner (no exec). Every other language is compiled once per
submission inside the sandbox (compile errors → verdict ``syntax_error`` with the compiler's message) and its binary is
exec'd per test from a forked child. A language is available only when its toolchain is a system package under
``/usr`` (the sandbox binds nothing else): Debian's ``g++``/``gcc``, ``default-jdk-headless``, ``golang-go``,
``rustc``. Names follow SandboxFusion's ``language`` values (``python``, ``cpp``, ``c``, ``java``, ``go``, ``rust``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

__all__ = ["LANGUAGES", "Language", "UnknownLanguageError", "available_languages", "get_language"]


class UnknownLanguageError(ValueError):
    """The language is not in the table, or its toolchain is not installed."""


@dataclass(frozen=True)
class Language:
    """One row of the table.

    ``source``: file name the code is written to; ``compile``/``run``: argv templates (``{mem}`` = memory limit in
    MB, ``{build}`` = the compile directory); ``binaries``: executables that must exist for the language to be
    available; ``address_space_limit``: False for runtimes (the JVM) that reserve far more virtual memory than they
    use and are bounded by their own heap flag instead; ``env``: extra environment for compile and run;
    ``extra_binds``: host paths the toolchain needs inside the sandbox (read-only)."""

    name: str
    source: str
    compile: tuple[str, ...] | None
    run: tuple[str, ...]
    binaries: tuple[str, ...]
    address_space_limit: bool = True
    compile_timeout_s: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    extra_binds: tuple[str, ...] = ()

    def available(self) -> bool:
        """True when every binary the language needs exists under ``/usr``."""
        for b in self.binaries:
            path = shutil.which(b, path="/usr/bin:/usr/local/bin")
            if path is None or not os.path.realpath(path).startswith("/usr/"):
                return False
        return True


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language("python", "main.py", None, ("python3", "main.py"), ()),
        Language(
            "cpp",
            "main.cpp",
            ("g++", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"),
            ("./main",),
            ("g++",),
        ),
        Language(
            "c", "main.c", ("gcc", "-O2", "-std=gnu11", "-pipe", "-o", "main", "main.c", "-lm"), ("./main",), ("gcc",)
        ),
        Language(
            "java",
            "Main.java",
            ("javac", "-J-Xmx512m", "Main.java"),
            ("java", "-Xmx{mem}m", "-Xss64m", "-XX:+UseSerialGC", "-cp", "{build}", "Main"),
            ("javac", "java"),
            address_space_limit=False,
            extra_binds=("/etc/java-17-openjdk",),
        ),
        Language(
            "go",
            "main.go",
            ("go", "build", "-o", "main", "main.go"),
            ("./main",),
            ("go",),
            compile_timeout_s=60.0,
            env={"GOCACHE": "/tmp/gocache", "GOPATH": "/tmp/gopath", "GO111MODULE": "off"},
        ),
        Language(
            "rust", "main.rs", ("rustc", "-O", "-o", "main", "main.rs"), ("./main",), ("rustc",), compile_timeout_s=60.0
        ),
    )
}

_ALIASES = {"python3": "python", "py": "python", "c++": "cpp", "cpp17": "cpp", "golang": "go", "rs": "rust"}


def get_language(name: str) -> Language:
    """Look up ``name`` (aliases such as ``python3``, ``c++`` accepted).

    Raises :class:`UnknownLanguageError` when unknown or when its toolchain is not installed."""
    key = _ALIASES.get(name.lower(), name.lower())
    lang = LANGUAGES.get(key)
    if lang is None:
        raise UnknownLanguageError(f"unknown language {name!r}; known: {sorted(LANGUAGES)}")
    if not lang.available():
        raise UnknownLanguageError(f"language {name!r} needs {list(lang.binaries)} under /usr, not installed here")
    return lang


def available_languages() -> list[str]:
    """Names of the languages whose toolchains are installed."""
    return [n for n, lang in LANGUAGES.items() if lang.available()]
