"""A container engine's client as the gate sees it, for tests: `docker run ... --name NAME ...
fake:image ARGS` starts a "container" (a process of its own session that ignores SIGTERM, as an
image's PID 1 without an init does) and waits on it; stopping the client leaves it running, as
stopping a real engine's client leaves its container. `docker kill NAME` kills it. `--version`
answers as a dlbench; `sweep-worker` exits (a side with no worker: runs start one by one).
Containers' PIDs are kept in FAKE_DOCKER_STATE."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

IMAGE = "fake:image"


def main(argv: list[str]) -> int:
    state = Path(os.environ["FAKE_DOCKER_STATE"])
    if argv[0] == "kill":
        pid_file = state / f"{argv[1]}.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            pid_file.unlink()
        return 0
    args = argv[argv.index(IMAGE) + 1 :]
    if args == ["--version"]:
        print("dlbench 0.0 (a fake container)")
        return 0
    if args[:1] == ["sweep-worker"]:
        return 0
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hang = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
    container = subprocess.Popen([sys.executable, "-c", hang], start_new_session=True)
    unnamed = f"unnamed-{container.pid}"  # no --name: nothing could kill it but its PID
    name = argv[argv.index("--name") + 1] if "--name" in argv else unnamed
    (state / f"{name}.pid").write_text(str(container.pid))
    return container.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
