"""The machine in each provenance record names the CPU (transformer_jax/run/provenance.py).

Two machines of the same kind here both report ``processor: x86_64`` and model name "AMD EPYC", one a Zen 1
(cpu family 23) and one a Zen 3 (family 25), and a training step ran 3.9× slower on the first: without the
family and model numbers, a run's wall time cannot be compared with another's.
"""

from transformer_jax.run import provenance

ZEN1 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 2

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
"""

ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU implementer\t: 0x41
"""


def test_cpu_model_names_family_and_model(tmp_path):
    zen1 = tmp_path / "zen1"
    zen1.write_text(ZEN1)
    zen3 = tmp_path / "zen3"
    zen3.write_text(ZEN1.replace("cpu family\t: 23", "cpu family\t: 25"))
    assert provenance.cpu_model(str(zen1)) == "AMD EPYC (family 23, model 1)"
    assert provenance.cpu_model(str(zen3)) == "AMD EPYC (family 25, model 1)"


def test_cpu_model_absent_is_none(tmp_path):
    arm = tmp_path / "arm"
    arm.write_text(ARM)
    assert provenance.cpu_model(str(arm)) is None
    assert provenance.cpu_model(str(tmp_path / "missing")) is None


def test_machine_records_the_cpu_model():
    assert provenance.machine(devices=False)["cpu_model"] == provenance.cpu_model()
