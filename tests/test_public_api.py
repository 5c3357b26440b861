"""The names a user imports stay where the README says they are, whatever folder their module lives in."""
import importlib
import subprocess
import sys

import nsample

PUBLIC = {
    "nsample": ["Choice", "Engine", "EngineConfig", "GenerationResult", "InvalidRequest", "NSampleError",
                "SamplingParams", "StreamEvent", "TokenLogprob", "Usage", "load"],
    "nsample.engine": ["Engine", "load"],
    "nsample.remote": ["RemoteConfig", "RemoteEngine", "UpstreamError", "connect"],
    "nsample.server": ["ServerConfig", "create_app"],
    "nsample.ui": ["build_app"],
    "nsample.analysis": ["best_of", "diversity_summary", "most_diverse", "quality_table", "similarity_heatmap",
                         "sweep", "diversity_vs_temperature", "vote", "majority_at_k", "pass_at_k", "run_checks",
                         "group_similar", "preference_pairs", "CodeCheck", "Expected", "Matches", "ValidJSON"],
}


def test_public_names_import():
    for module, names in PUBLIC.items():
        found = importlib.import_module(module)
        missing = [n for n in names if not hasattr(found, n)]
        assert not missing, f"{module} lacks {missing}"


def test_all_lists_exactly_the_top_level_names():
    assert sorted(nsample.__all__) == sorted(PUBLIC["nsample"])


def test_remote_server_and_analysis_import_without_torch():
    code = ("import sys; import nsample, nsample.remote, nsample.server, nsample.engine.engine_base, "
            "nsample.models.embedded; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_engine_is_the_local_engine_class():
    from nsample.engine.engine import Engine, load

    assert nsample.Engine is Engine and nsample.load is load
