"""The README's two commands are what CI and newcomers run: keep them honest."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _ci_test_command():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    marker = lines.index("# README test command (keep identical to the README):")
    return lines[marker + 1].strip()


def test_ci_runs_the_readme_test_command():
    command = _ci_test_command()
    assert "pip install torch==2.13.0" in command and "pytest" in command
    assert command in (ROOT / "README.md").read_text()


def test_readme_main_job_runs_the_sweep_command():
    readme = (ROOT / "README.md").read_text()
    assert "intrinsic-rank sweep --out runs/sweep" in readme


@__import__("pytest").mark.slow
def test_readme_python_blocks_run():
    """Every Python block of the README runs, in order, in one namespace."""
    text = (ROOT / "README.md").read_text()
    blocks = [part.split("```")[0] for part in text.split("```python")[1:]]
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
