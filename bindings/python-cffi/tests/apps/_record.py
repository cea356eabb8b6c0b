"""What the framework apps note for the suites to read back: startup,
shutdown and background-task records, one line each, appended to the file
named by NSV_APP_EVENTS (nothing when it is unset, as under the benchmark).
Appending whole lines with O_APPEND keeps records from several worker
processes apart."""
import os


def record(line: str) -> None:
    """Append one line to the events file, if there is one."""
    path = os.environ.get("NSV_APP_EVENTS")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
