"""What the GPU test scripts share (graph_bisect.py, checkpoint_bisect.py,
flight_recorder.py)."""
import subprocess


def run(command, log, env=None, timeout=300):
    """Runs `command`, keeps its exit status and output in the file `log`
    (a Path), and returns the CompletedProcess."""
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
    log.write_text(f"$ {' '.join(command)}\nexit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done
