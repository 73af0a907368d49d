"""One codec registry (hina.codecs): every entry point takes its names from it, every worker
codec is built by the one registry of builders, and old or ambiguous names get a clear error."""
from __future__ import annotations

import dataclasses
import json

import subprocess
import sys

import pytest
import torch

from hina import codecs as names
from hina import protocol as P
from hina.controller.config import CODECS, ConfigError, JobConfig, WorkerConfig
from hina.worker.codecs import registry

#: small parameters for every builder (the defaults of some are sized for big buckets)
SMALL = {"fetchsgd": dict(rows=3, columns=64, k=4), "sketched_sgd": dict(rows=3, columns=64, k=8),
         "lossless": dict(columns=256)}


def test_names_are_distinct_and_every_worker_codec_has_one_builder():
    assert len(set(names.REGISTRY)) == len(names.REGISTRY)
    assert set(registry.builders()) == set(names.names(kind="codec"))


@pytest.mark.parametrize("name", names.names(kind="codec"))
def test_built_codec_carries_its_registry_name_and_lane_op(name):
    codec = registry.build(name, n_workers=2, rank=1, **SMALL.get(name, {}))
    assert codec.name == name
    x = torch.randn(300)
    agreed = codec.agreement(x)
    lanes = codec.encode(x, agreed)
    from hina.worker.codecs import reference_aggregate
    from hina.worker.collective import _OP_OF_LANE     # the codec's lane op -> the wire's op
    ops = {_OP_OF_LANE[s.op].name for s in lanes.streams}
    if name == "sparse_thc":    # an OR round of the rows, then THC's lanes of their union
        assert ops == {"OR"}
        lanes = codec.followup(reference_aggregate([lanes]), agreed, meta=lanes.meta)
        assert {_OP_OF_LANE[s.op].name for s in lanes.streams} == {"LUT_SUM"}
    elif name == "adaptive":      # its second round is the chosen codec's agreement (MAX lanes)
        assert ops == {"MAX"} and codec.last_choice[0] == "thc"     # 300 values: THC is cheaper
    else:
        assert names.lookup(name).lane_op in ops


def test_every_entry_point_takes_names_from_the_registry():
    from hina.demo import digits
    from hina.mininet import workloads
    assert set(CODECS) == set(names.names(through_switch=True))
    assert all(CODECS[n] == names.lookup(n).lane_op for n in CODECS)
    assert set(digits.MODES) <= set(names.REGISTRY) and digits.MODES[0] == "fp32"
    assert set(workloads.CODECS) <= set(names.REGISTRY)
    help_text = subprocess.run([sys.executable, "-m", "hina.controller.cli", "job", "create",
                                "--help"], capture_output=True, text=True).stdout
    assert "{" + ",".join(CODECS) + "}" in help_text.replace("\n", "").replace(" ", "")


def test_renamed_and_unknown_names_are_refused_clearly():
    with pytest.raises(names.UnknownCodecError, match="'fetchsgd'.*'sketched_sgd'"):
        registry.build("sketch", 2)
    with pytest.raises(names.UnknownCodecError, match="now called fixed"):
        names.lookup("fixedpoint")
    with pytest.raises(names.UnknownCodecError, match="known: fp32, thc"):
        names.lookup("zip")
    with pytest.raises(ValueError, match="not aggregated through the switch"):
        registry.build("fp32", 2)
    with pytest.raises(ValueError, match="raw SUM lane op"):
        registry.build("sum", 2)
    worker = WorkerConfig(ip="10.0.0.1", udp_port=1, port=1, mac="02:00:00:00:00:01")
    with pytest.raises(ConfigError, match="does not go through the switch"):
        JobConfig(job_id=1, codec="fp32", workers=(worker,))
    with pytest.raises(ConfigError, match="job 1: unknown codec 'sketch'"):
        JobConfig(job_id=1, codec="sketch", workers=(worker,))


def test_a_job_of_the_adaptive_codec_gets_a_lut_and_a_sketch_and_its_workers_build_it():
    from hina.worker.jobclient import CodecParams
    worker = WorkerConfig(ip="10.0.0.1", udp_port=1, port=1, mac="02:00:00:00:00:01")
    job = JobConfig(job_id=1, codec="adaptive", workers=(worker,), rht_seed=4, sketch_seed=6)
    assert job.thc_table and job.sketch_columns == 1 << 12 and job.lane_op == "SUM"
    params = CodecParams("adaptive", job.lane_op, job.thc_table, job.thc_granularity,
                         job.rht_seed, job.sketch_rows, job.sketch_columns, job.sketch_seed)
    codec = registry.from_job(params, 1, 0)
    assert codec.name == "adaptive" and codec.dense.table == job.thc_table
    assert codec.sparse.cs.columns == job.sketch_columns and codec.sparse.cs.seed == 6
    with pytest.raises(ConfigError, match="in-switch sketching is not for it"):
        JobConfig(job_id=1, codec="adaptive", workers=(worker,), in_switch_sketch=True)


def test_an_adaptive_job_declares_the_codecs_its_buckets_may_use():
    """JobConfig.adaptive_choices: all four by default, a subset kept (with thc, sparse_thc or
    block_sparse for dense buckets), anything else refused; the state file and the workers' codec carry it."""
    from hina.worker.jobclient import CodecParams
    worker = WorkerConfig(ip="10.0.0.1", udp_port=1, port=1, mac="02:00:00:00:00:01")
    assert JobConfig(job_id=1, codec="adaptive", workers=(worker,)).adaptive_choices == \
        ("block_sparse", "lossless", "sparse_thc", "thc")
    job = JobConfig(job_id=1, codec="adaptive", workers=(worker,),
                    adaptive_choices=("block_sparse", "lossless"))
    assert JobConfig.from_json(json.loads(json.dumps(job.to_json()))) == job
    params = CodecParams("adaptive", job.lane_op, job.thc_table, job.thc_granularity, job.rht_seed,
                         job.sketch_rows, job.sketch_columns, job.sketch_seed,
                         adaptive_choices=job.adaptive_choices)
    codec = registry.from_job(params, 2, 0)
    assert codec.choices == ("block_sparse", "lossless") and codec.words == P.WORDS
    # the job's words per packet are its block-sparse blocks (Tofino 1's build: 32)
    assert registry.from_job(params, 2, 0, words=P.TNA_TOFINO1_WORDS).words == 32
    assert registry.from_job(dataclasses.replace(params, name="thc"), 2, 0, words=32).name == "thc"
    assert codec.choose(1 << 16, 1 << 16, 512) == "block_sparse"     # dense, yet never THC
    for bad, match in ((("lossless",), "for dense buckets"),
                       (("thc", "zip"), "distinct names"), (("thc", "thc"), "distinct names")):
        with pytest.raises(ConfigError, match=match):
            JobConfig(job_id=1, codec="adaptive", workers=(worker,), adaptive_choices=bad)
    with pytest.raises(ConfigError, match="only for codec adaptive"):
        JobConfig(job_id=1, codec="thc", workers=(worker,), adaptive_choices=("thc",))


def test_state_written_with_old_names_loads_under_the_new_ones():
    worker = WorkerConfig(ip="10.0.0.1", udp_port=1, port=1, mac="02:00:00:00:00:01")
    for old, new in (("fixedpoint", "fixed"), ("sketch", "fetchsgd")):
        data = JobConfig(job_id=1, codec=new, workers=(worker,)).to_json()
        data["codec"] = old
        assert JobConfig.from_json(data).codec == new


def test_registering_twice_or_a_bad_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        names.register(names.CodecInfo("thc", "LUT_SUM", "again"))
    with pytest.raises(ValueError, match="lower-case"):
        names.register(names.CodecInfo("Bad-Name", "SUM", "x"))
    assert "Bad-Name" not in names.REGISTRY
