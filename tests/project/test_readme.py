"""The README's two commands are what CI and newcomers run: keep them honest."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
def test_readme_python_blocks_run(tmp_path, monkeypatch):
    """Every Python block of the README runs on its own (a fresh namespace: a reader may
    copy any one of them), in a fresh folder; the bash blocks that make files for them
    (``my_task.npz``) run first, as a reader would."""
    import os
    import re
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    text = (ROOT / "README.md").read_text()
    for kind, block in re.findall(r"```(python|bash)\n(.*?)```", text, flags=re.S):
        if kind == "python":
            exec(compile(block, "README.md", "exec"), {"__name__": "__main__"})
        elif "my_task.npz" in block:  # not the install, test, docs or long-run commands
            subprocess.run(["bash", "-euc", block], check=True, env=env, cwd=tmp_path)


def test_readme_python_blocks_stand_alone():
    """Each Python block defines what it uses (a name it reads is imported or assigned in
    the block itself), so that a reader can run any one of them alone."""
    import ast
    import builtins
    import re

    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        used = {node.id for node in ast.walk(tree)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        assert used <= defined, (sorted(used - defined), block[:80])


def test_readme_writes_under_runs():
    """The README's commands write under runs/, which git ignores."""
    import re

    text = (ROOT / "README.md").read_text()
    for out in re.findall(r"--out (\S+)", text):
        assert out.startswith(("runs/", "OUT")), out
    assert "runs/" in (ROOT / ".gitignore").read_text().split()


def _requirement_names(requirements):
    import re

    return {re.split(r"[\s<>=!~\[;]", req, maxsplit=1)[0].lower().replace("_", "-")
            for req in requirements}


def test_readme_python_blocks_need_only_what_the_readme_installed_before_them():
    """Each block imports only the package's dependencies plus the extras that the README's
    ``pip install -e ".[...]"`` commands above it installed (the main command's ``plot``
    first; the test and docs commands do not count): a newcomer who runs the main command
    and then the README's Python blocks never hits a missing module."""
    import ast
    import importlib.metadata as metadata
    import re
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = __import__("pytest").importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    installed = _requirement_names(project["dependencies"]) | {"intrinsic-rank"}
    providers = metadata.packages_distributions()
    text = (ROOT / "README.md").read_text()
    missing = []
    for part in re.split(r"(```python\n.*?```)", text, flags=re.S):
        for line in ([] if part.startswith("```python") else part.splitlines()):
            if "pytest" in line or "sphinx" in line:
                continue  # the test and docs commands are not what a user's code runs in
            for extra_list in re.findall(r'pip install -e "\.\[([\w,]+)\]"', line):
                for extra in extra_list.split(","):
                    installed |= _requirement_names(extras[extra])
        if not part.startswith("```python"):
            continue
        for node in ast.walk(ast.parse(part[len("```python\n"):-3])):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                     else [])
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "intrinsic_rank":
                    continue
                dists = {d.lower().replace("_", "-") for d in providers.get(top, [top])}
                if not dists & installed:
                    missing.append(f"{name} (from {sorted(dists)})")
    assert not missing, f"README blocks import what the README did not install: {missing}"
