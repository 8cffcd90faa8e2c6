"""Sharding tests: the same training on 1 device, on 8 simulated devices with several meshes, and on 2 processes.

The simulated device count (``XLA_FLAGS=--xla_force_host_platform_device_count``) must be set before JAX starts,
so the runs happen in subprocesses (tests/scripts/sharded_losses.py, tests/scripts/multiprocess_worker.py) that
print JSON. Each expensive subprocess belongs to exactly one test, so pytest-xdist never runs it twice.

Multi-host on one machine (DESIGN.md, "Facts checked on this machine"): two processes with 2 CPU devices each,
gloo CPU collectives and ``jax.distributed.initialize`` on a localhost coordinator form one 4-device job; the
coordinator's port is reserved for the test (conftest.py's coordinator_port says why no other process can take it).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).parent / "scripts"
TIMEOUT_S = 600  # generous: the machine running the tests may be shared; a healthy run takes well under a minute


def run_script(args: list[str], timeout: float = TIMEOUT_S) -> dict:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stderr[-5000:]}"
    return last_json_line(proc.stdout)


def last_json_line(stdout: str) -> dict:
    # Other libraries (gloo) may print to stdout as well: the result is the last line that is a JSON object.
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON in output:\n{stdout[-3000:]}"
    return json.loads(lines[-1])


def test_meshes_give_same_losses_shard_state_and_restore_across_meshes(tmp_path):
    out = run_script([str(SCRIPTS / "sharded_losses.py"), str(tmp_path / "run")])

    # 1. Same training, any mesh: N steps (dropout on) give the one-device losses (fp32; only summation order differs).
    losses = out["losses"]
    assert set(losses) == {"1", "8,1,1", "2,4,1", "2,2,2", "hash 1", "hash 2,2,2"}
    reference = np.array(losses["1"])
    assert len(reference) == 3 and reference[-1] < reference[0]
    for mesh in ("8,1,1", "2,4,1", "2,2,2"):
        np.testing.assert_allclose(losses[mesh], reference, rtol=1e-5, err_msg=f"mesh {mesh}")
    # model.dropout_rng="hash" numbers each element by its place in the whole array: the same masks on any mesh
    # (other masks than threefry's, so other losses from the first step on).
    np.testing.assert_allclose(losses["hash 2,2,2"], losses["hash 1"], rtol=1e-5)
    assert np.abs(np.array(losses["hash 1"]) - reference).min() > 1e-4

    # 2. The state really is sharded as the logical-axis rules say (checked on the arrays the step returned).
    specs, shapes = out["specs"]["2,2,2"], out["shard_shapes"]["2,2,2"]
    assert "fsdp" in specs["embedding"] and "tensor" in specs["embedding"]  # [vocab, embed]
    assert specs["w_q"][:2] == ["fsdp", "tensor"]  # [embed, heads, kv]
    assert specs["w_1"] == ["fsdp", "tensor"]  # [embed, mlp]
    assert specs["adam_mu_w_q"] == specs["w_q"]  # Adam's moments are sharded like their parameters
    assert shapes["embedding"] == [[384, 32], [192, 16]]  # vocab / tensor 2, embed / fsdp 2
    assert shapes["w_q"] == [[32, 2, 16], [16, 1, 16]]
    assert shapes["w_1"] == [[32, 64], [16, 32]]
    assert shapes["adam_mu_w_q"] == shapes["w_q"]
    assert out["shard_shapes"]["2,4,1"]["w_1"] == [[32, 64], [8, 64]]  # fsdp 4, tensor 1
    assert out["shard_shapes"]["8,1,1"]["w_1"] == [[32, 64], [32, 64]]  # pure data parallel: replicated
    # init_state creates the state directly on the mesh, with the same values as on one device.
    assert out["sharded_init_equal"]
    assert out["sharded_init_table_shard"] == [192, 16]

    # 3. Save on (8,1,1), restore onto (2,2,2) with make_setup(config, other_mesh).abstract_state.
    cross = out["cross_mesh"]
    assert cross["steps"] == [2]  # checkpoint_every_steps=2 after 2 steps
    assert cross["same_structure"] and cross["num_leaves"] > 100
    assert cross["mismatched_values"] == [], "restored values differ from the saved ones"
    assert cross["mismatched_shardings"] == [], "restored arrays do not carry the new mesh's shardings"
    assert cross["restored_step"] == 2
    assert cross["table_mesh_shape"] == {"data": 2, "fsdp": 2, "tensor": 2}
    assert cross["table_spec"] == ["tensor", "fsdp"]
    assert cross["restored_data"] == cross["saved_data"]  # the iterator position travels with the checkpoint
    np.testing.assert_allclose(cross["next_loss_b"], cross["next_loss_a"], rtol=1e-5)  # training continues alike


def test_two_processes_match_one_process(coordinator_port):
    worker = str(SCRIPTS / "multiprocess_worker.py")
    port = coordinator_port
    # The two hosts and the single-process reference (4 devices) run at the same time.
    procs = [subprocess.Popen([sys.executable, worker, str(i), "2", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    procs.append(subprocess.Popen([sys.executable, worker, "0", "1", "0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
            outputs.append((proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for rc, _, stderr in outputs:
        assert rc == 0, stderr[-5000:]
    host_0, host_1, single = (last_json_line(stdout) for _, stdout, _ in outputs)
    assert (host_0["process_index"], host_1["process_index"]) == (0, 1)
    for host in (host_0, host_1):
        assert host["process_count"] == 2 and host["device_count"] == 4 and host["local_device_count"] == 2
    assert single["process_count"] == 1 and single["device_count"] == 4
    assert len(single["losses"]) == 3
    # Every host sees the same (replicated) loss, equal to the one-process run on 4 devices.
    np.testing.assert_array_equal(host_0["losses"], host_1["losses"])
    np.testing.assert_allclose(host_0["losses"], single["losses"], rtol=1e-5)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
