"""Making a submission runnable, inside the sandbox (standard library only): Python source compiled to a code object
in the runner (its test children inherit it), or a native program (C++, Java, …: the language table of
:mod:`rlvr.judge.languages`) written to and built once in :data:`BUILD`, then exec'd in each test child. Used by
:mod:`runner`; errors here are the program's (``compile_error``), never the judge's.
"""

import os
import resource

import proc

BUILD = "/tmp/build"


def compile_code(code, name):
    """(code object, None) or (None, the compiler's one-line error)."""
    try:
        return compile(code, name, "exec", dont_inherit=True), None
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        import traceback  # not in the warden's image (see warden.py): only a program that does not compile pays it

        return None, "".join(traceback.format_exception_only(type(exc), exc)).strip()


def build_native(req):
    """Write the source to /tmp/build and compile it once (compile errors are the program's fault).
    Returns (native, error)."""
    import shutil  # not in the warden's image (see wipe.remove_tree)
    import subprocess

    lang = req["native"]
    shutil.rmtree(BUILD, ignore_errors=True)
    os.makedirs(BUILD)
    with open(os.path.join(BUILD, lang["source"]), "w", encoding="utf-8") as fh:
        fh.write(req["code"])
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", **lang.get("env", {})}
    if lang.get("compile"):

        def limits():
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20,) * 2)

        try:
            done = subprocess.run(
                lang["compile"], cwd=BUILD, env=env, capture_output=True,
                timeout=float(lang.get("compile_timeout_s", 30)), preexec_fn=limits,
            )
        except subprocess.TimeoutExpired:
            return None, "compilation timed out"
        except OSError as exc:
            return None, f"compiler not runnable: {exc}"
        finally:
            proc.kill_all()
        if done.returncode != 0:
            return None, (done.stderr or done.stdout).decode("utf-8", "replace")[-4000:] or "compilation failed"
    mem = int(req.get("memory_limit_mb") or 1024)
    argv = [a.replace("{mem}", str(mem)).replace("{build}", BUILD) for a in lang["run"]]
    argv[0] = os.path.join(BUILD, argv[0][2:]) if argv[0].startswith("./") else shutil.which(argv[0], path=env["PATH"])
    return {"argv": argv, "env": env, "as_limit": bool(lang.get("as_limit", True))}, None


def native_child(argv, env):
    """In a test child: exec the built program (``argv``, ``env``); exit 127 when it cannot be exec'd."""
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"cannot exec {argv[0]}: {exc}\n".encode())
    os._exit(127)
