"""One-off: the real codex streaming a long answer under roost, the supervisor's CPU against
codex's own (an earlier measurement: 8.6 % of a core against codex's 12.6 %). Needs the pinned
CLIs (`bash tests/real/install.sh`); the model is the loopback stand-in of the real-CLI tests,
streaming its ~2,400-word answer over ``--seconds`` (30 by default). Prints figures; never fails
on them. Everything runs under a temporary directory and is killed at the end.

    .venv/bin/python bench/bench_stream.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.conftest import Node, wait_for
from tests.fakes.model_api import LONG_END, ModelApi
from tests.real.harness import codex_env, locate_cli


def cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    cli = locate_cli("codex")
    if cli is None:
        sys.exit("the real codex is not installed: bash tests/real/install.sh")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = root / "proj"
        cwd.mkdir()
        node = Node(root)
        api = ModelApi(log_path=root / "api.jsonl", slow_seconds=args.seconds).start()
        try:
            env = codex_env(root / "homes", api, cwd)
            node.up()
            given = {**env, "ROOST_CODEX_BIN": cli.argv[-1]}
            env_args = [a for k, v in given.items() for a in ("--env", f"{k}={v}")]
            rec = node.run("spawn", "codex", "--name", "c", "--cwd", str(cwd), *env_args)
            wait_for(lambda: node.record("c")["activity"] == "ready", 120, "codex ready")
            active = node.record("c")["active"]
            sup, agent = psutil.Process(active["pid"]), tree(active["agent_pid"])
            node.run("prompt", "c", "Please give a LONG answer")
            node.wait_screen("c", "Sentence 1 of the long answer", timeout=60)
            start, s0, a0 = time.monotonic(), cpu([sup]), cpu(agent)
            transcript = node.state_dir / "sessions" / rec["record"]["id"] / "transcript.bin"
            b0 = transcript.stat().st_size
            node.wait_screen("c", LONG_END, timeout=args.seconds * 4)
            elapsed = time.monotonic() - start
            s1, a1, b1 = cpu([sup]), cpu(agent), transcript.stat().st_size
        finally:
            node.kill_all()
            api.close()
    print(f"streamed {elapsed:.1f} s, {(b1 - b0) / elapsed / 1024:.1f} KiB/s to the terminal")
    print(f"supervisor {100 * (s1 - s0) / elapsed:.1f} % of a core")
    print(f"codex (its process tree) {100 * (a1 - a0) / elapsed:.1f} % of a core")
    print(f"load average {psutil.getloadavg()}")


if __name__ == "__main__":
    main()
