"""Profiles: every shipped one loads; bad ones are refused with file, key and what is allowed."""

from pathlib import Path

import pytest
import yaml

from fxctl.errors import BadInput
from fxctl.sim.cost import hbm_kv_blocks, kv_bytes_per_token
from fxctl.sim.profile import PROFILE_DIR, load_profile

SHIPPED = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
R2_PROFILE = "mi308x-qwen3-coder-480b-tp8"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_load_and_every_cost_parameter_has_a_source(name):
    profile = load_profile(name)
    assert profile.name == name
    for section in ("model", "gpu", "efficiency", "tiers"):
        for key, param in profile.sections.get(section, {}).items():
            if isinstance(param.value, (int, float)) and not isinstance(param.value, bool) \
                    and key not in ("max_model_len", "count", "chunk_tokens"):
                assert param.source, f"{name}: {section}.{key} has no source"


def test_480b_kv_geometry_matches_the_field_facts_chunk_size():
    profile = load_profile(R2_PROFILE)
    per_rank_chunk = 256 * kv_bytes_per_token(profile) / 8
    assert per_rank_chunk == 3.875 * 2**20  # field-facts: 3.875 MiB chunks for the 480B at TP8
    # (192 GB x 8 x 0.9 - 450 GB - 8 x 8 GB) / (126976 B x 16)
    expected = int((192e9 * 8 * 0.9 - 450e9 - 64e9) // (126976 * 16))
    assert hbm_kv_blocks(profile) == expected


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def base_profile() -> dict:
    return yaml.safe_load((PROFILE_DIR / "lab.yaml").read_text())


def test_unknown_key_names_file_key_and_allowed(tmp_path):
    data = base_profile()
    data["tiers"]["l3_size_gb"] = {"value": 1, "source": "x"}
    path = write(tmp_path, data)
    with pytest.raises(BadInput) as err:
        load_profile(str(path))
    message = err.value.message
    assert str(path) in message and "tiers.l3_size_gb" in message and "l1_size_gb" in message


def test_wrong_type_and_bad_choice_are_named(tmp_path):
    data = base_profile()
    data["gpu"]["hbm_gb"] = {"value": "lots", "source": "x"}
    data["tiers"]["l2_backend"] = "s3"
    with pytest.raises(BadInput) as err:
        load_profile(str(write(tmp_path, data)))
    assert "gpu.hbm_gb: 'lots' must be a number" in err.value.message
    assert "tiers.l2_backend: 's3' is not allowed; one of: fxctl, lmcache-disk" in err.value.message


def test_cost_parameter_without_source_is_refused(tmp_path):
    data = base_profile()
    data["efficiency"]["prefill_mfu"] = 0.5
    with pytest.raises(BadInput, match="efficiency.prefill_mfu: needs a source"):
        load_profile(str(write(tmp_path, data)))


def test_missing_cost_parameter_and_unknown_profile(tmp_path):
    data = base_profile()
    del data["gpu"]["peak_tflops"]
    with pytest.raises(BadInput, match="gpu: missing required key 'peak_tflops'"):
        load_profile(str(write(tmp_path, data)))
    with pytest.raises(BadInput, match="no such profile: nope") as err:
        load_profile("nope")
    assert "lab" in err.value.hint


@pytest.mark.parametrize("name", [n for n in SHIPPED if load_profile(n).cost_model == "roofline"])
def test_every_roofline_profile_serves_a_long_prefix_from_l2_at_the_per_request_rate(name):
    """A lone request's prefix comes back from L2 at the per-request read rate. Where that beats recompute
    is the profile's business: on the MI308X (R2) it does; on H200 and Atlas, whose L2 parameters are
    carried over from the R2 fit, a lone 32K-token bf16 prefix recomputes faster than it loads."""
    from fxctl.sim.connector import tier_rates
    from fxctl.sim.engine import Engine
    from fxctl.sim.request import SimRequest

    profile = load_profile(name)
    tokens = min(32_768, profile.get("model", "max_model_len") // 2)
    prompt = list(range(50_000, 50_000 + tokens))

    def ttft(engine, rid):
        req = SimRequest(rid, prompt, 2, arrival=engine.now)
        engine.add_request(req)
        while engine.has_work():
            engine.step()
        return req.ttft()

    engine = Engine(profile, offload=True)
    recompute = ttft(engine, "fill")
    engine.reset_prefix_cache()
    engine.reset_tiers(("l1",))
    from_l2 = ttft(engine, "cold")
    loaded = (tokens // 256 - (tokens % 256 == 0)) * 256 * kv_bytes_per_token(profile)
    load_s = loaded / tier_rates(profile).l2_request_bps
    assert load_s <= from_l2 <= load_s + 0.1 * recompute  # plus the last partial chunk's prefill
    if name.startswith("mi308x") or name == "lab":
        assert from_l2 < recompute


def test_profile_problems_name_the_line(tmp_path):
    path = tmp_path / "p.yaml"
    text = (PROFILE_DIR / "lab.yaml").read_text()
    path.write_text(text + "tierz: {}\n")
    with pytest.raises(BadInput) as err:
        load_profile(str(path))
    line = len(text.splitlines()) + 1
    assert f"{path}:{line}: tierz: unknown key; allowed here: name, description" in err.value.message
    path.write_text("- not a mapping\n")
    with pytest.raises(BadInput, match=":1: must be a mapping, got a list"):
        load_profile(str(path))
