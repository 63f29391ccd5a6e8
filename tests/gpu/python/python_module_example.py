"""Runs the PyTorch example of docs/python.md as written there: the page's
mm.py recorded with `kcap record`, then its notebook block (the recorded
output read through the Python module `kcap` against a CPU reference) run
as a script. The code comes from the page itself, so the page cannot drift
from what runs.

  python_module_example.py --kcap KCAP --doc docs/python.md --dir DIR
(PYTHONPATH must reach the module; the interpreter must have PyTorch.)
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path


def blocks(page):
    """The ```python blocks of the page, in order."""
    return re.findall(r"```python\n(.*?)```", page, re.S)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kcap", required=True)
    parser.add_argument("--doc", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    code = [b for b in blocks(Path(args.doc).read_text()) if "torch" in b]
    program = next((b for b in code if b.startswith("# mm.py")), None)
    notebook = next((b for b in code if "kcap.open(\"mm.kcap\")" in b), None)
    if program is None or notebook is None:
        sys.exit(f"{args.doc}: no mm.py block or no block reading mm.kcap")
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("mm.kcap", "inputs.pt", "pointers.json"):
        (work / name).unlink(missing_ok=True)
    (work / "mm.py").write_text(program)
    (work / "notebook.py").write_text(notebook)
    record = [args.kcap, "record", "-q", "-o", "mm.kcap", "--", sys.executable, "mm.py"]
    done = subprocess.run(record, cwd=work, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"{' '.join(record)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    done = subprocess.run([sys.executable, "notebook.py"], cwd=work, capture_output=True, text=True,
                          timeout=300, env=os.environ)
    print(done.stdout, end="")
    if done.returncode != 0:
        sys.exit(f"the notebook block of {args.doc} failed (exit {done.returncode}):\n{done.stderr}")
    error = re.search(r"max abs error (\S+)", done.stdout)
    if error is None or not done.stdout.count("\n") >= 3:
        sys.exit("the notebook block printed no launches or no error figure")
    print(f"docs/python.md example: the recorded relu(a @ b) matches the CPU reference (max abs error "
          f"{error.group(1)})")


if __name__ == "__main__":
    main()
