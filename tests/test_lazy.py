"""Names loaded on first use (SPEC 1), the root package included; and no dead names."""

import importlib
import subprocess
import sys

import intrinsic_rank
from intrinsic_rank._lazy import lazy_names


def test_a_submodule_named_in_the_table_loads_on_first_use():
    namespace = {}
    home, get, names = lazy_names("json", {"decoder": ["JSONDecoder"]}, namespace,
                                  submodules=["encoder"])
    assert home == {"JSONDecoder": "decoder", "encoder": None}
    assert get("encoder") is importlib.import_module("json.encoder")
    assert get("JSONDecoder").__name__ == "JSONDecoder"
    assert set(namespace) == {"encoder", "JSONDecoder"}  # each loads once
    assert {"encoder", "JSONDecoder"} <= set(names())


def test_the_root_package_loads_its_names_through_lazy_names():
    assert intrinsic_rank.__getattr__.__qualname__.startswith("lazy_names.")
    code = ("import sys, intrinsic_rank as i\n"
            "before = {'torch', 'numpy'} & set(sys.modules)\n"
            "print(sorted(before), i.spectral.__name__, i.SequenceScaler.__name__,\n"
            "      'cli' in dir(i), 'AttentionRankEstimator' in dir(i))\n"
            "try:\n    i.nothing\nexcept AttributeError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split() == ["[]", "intrinsic_rank.spectral", "SequenceScaler", "True", "True"]
    assert second == "module 'intrinsic_rank' has no attribute 'nothing'"


def test_the_dead_names_are_gone():
    from intrinsic_rank.experiments.entropic import _head_measure, _real_heads
    from intrinsic_rank.experiments.min_ip import _law

    for module, name in ((_law, "LAW_COLUMNS"), (_law, "SLOT_COLUMNS"),
                         (_real_heads, "MAP_DEFAULTS"), (_head_measure, "TRAINING")):
        assert not hasattr(module, name), name


def test_experiments_and_cli_export_what_users_call():
    import intrinsic_rank.cli as cli
    import intrinsic_rank.experiments as experiments

    assert cli.__all__ == ["main"]
    internals = {"lock_folder", "write_csv", "write_json", "check_output_folder", "cpu_count"}
    assert not internals & set(experiments.__all__)
    for name in internals - {"cpu_count"}:
        assert not hasattr(experiments, name), name
        assert hasattr(experiments.runner, name), name  # where the papers' packages find them
    for name in ("reproduce", "register", "Experiment", "Option", "rank_sweep",
                 "head_rank_map", "format_table"):
        assert name in experiments.__all__, name
