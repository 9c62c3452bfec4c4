"""Path-loss timeouts after a reboot: provision persists what nvme-cli cannot pass (ctrl_loss_tmo -1,
fast_io_fail_tmo), and fxctl-nvme-timeouts.service's script writes it to each live controller of the
array's NQN after nvmf-autoconnect (run here against a fake /sys/class/nvme)."""

from __future__ import annotations

import json
import runpy

from fxctl import data
from fxctl.inventory import load_inventory_text
from fxctl.ops import nvme_persist
from fxctl.provision.initiator import BootTimeoutsRecipe

INVENTORY = """
version: 1
hosts:
  t1: {address: 10.0.0.1, roles: [target]}
  i1: {address: 10.0.0.2, roles: [initiator]}
arrays:
  - name: kv
    target: t1
    nqn: nqn.2026-11.io.example:kv
    listen: {address: 10.99.0.1}
    drives: [{serial: S1}, {serial: S2}]
    initiators: [i1]
    filesystem: {label: kv, mount: /mnt/kv}
"""


def recipe_and_host():
    inventory = load_inventory_text(INVENTORY)
    return BootTimeoutsRecipe(inventory.arrays), inventory.hosts["i1"], inventory.arrays[0]


def test_bare_initiator_gets_the_json_script_and_enabled_unit():
    recipe, host, array = recipe_and_host()
    facts = dict.fromkeys(recipe.facts(host))
    facts["enabled"] = "not-found"
    steps = recipe.plan(host, facts)
    written = " ".join(c.masked() for c in steps[0].commands)
    for path in (nvme_persist.CONFIG_PATH, nvme_persist.SCRIPT_PATH, nvme_persist.UNIT_PATH):
        assert path in written
    assert [c.masked() for c in steps[1].commands] == ["systemctl daemon-reload",
                                                       "systemctl enable fxctl-nvme-timeouts.service"]
    document = json.loads(nvme_persist.timeouts_json({array.nqn: {"ctrl_loss_tmo": -1, "fast_io_fail_tmo": 5,
                                                                  "reconnect_delay": 2}}))
    assert document == {"arrays": [{"nqn": array.nqn, "timeouts": {"ctrl_loss_tmo": -1, "fast_io_fail_tmo": 5,
                                                                    "reconnect_delay": 2}}]}


def test_converged_initiator_changes_nothing():
    recipe, host, array = recipe_and_host()
    wanted = {array.nqn: {k: getattr(array.connect, k) for k in ("reconnect_delay", "ctrl_loss_tmo",
                                                                  "fast_io_fail_tmo")}}
    facts = {path: content for path, (content, _) in nvme_persist.persisted_files(wanted).items()}
    facts["enabled"] = "enabled"
    assert all(step.commands == [] for step in recipe.plan(host, facts))


def test_a_host_without_arrays_has_nothing_to_persist():
    recipe, _, _ = recipe_and_host()
    host = load_inventory_text(INVENTORY).hosts["t1"]
    assert recipe.plan(host, dict.fromkeys(recipe.facts(host))) == []


def test_boot_script_writes_live_controllers_of_the_nqn_in_order(tmp_path, capsys):
    script = tmp_path / "nvme_timeouts.py"
    script.write_text(data.text("nvme_timeouts.py"))
    sysfs = tmp_path / "nvme"
    for name, nqn, state in (("nvme0", "nqn.a", "live"), ("nvme1", "nqn.other", "live")):
        (sysfs / name).mkdir(parents=True)
        (sysfs / name / "subsysnqn").write_text(nqn + "\n")
        (sysfs / name / "state").write_text(state + "\n")
        for key in ("reconnect_delay", "ctrl_loss_tmo", "fast_io_fail_tmo"):
            (sysfs / name / key).write_text("off\n")
    config = tmp_path / "t.json"
    config.write_text(nvme_persist.timeouts_json({"nqn.a": {"ctrl_loss_tmo": -1, "fast_io_fail_tmo": 5,
                                                            "reconnect_delay": 2}}))
    main = runpy.run_path(str(script))["main"]
    assert main(str(config), str(sysfs)) == 0
    assert (sysfs / "nvme0" / "ctrl_loss_tmo").read_text() == "-1\n"
    assert (sysfs / "nvme0" / "fast_io_fail_tmo").read_text() == "5\n"
    assert (sysfs / "nvme1" / "ctrl_loss_tmo").read_text() == "off\n", "another subsystem is left alone"
    assert "nvme0 (nqn.a): reconnect_delay=2, ctrl_loss_tmo=-1, fast_io_fail_tmo=5" in capsys.readouterr().out


def test_boot_script_names_an_array_that_never_connected(tmp_path, capsys):
    script = tmp_path / "nvme_timeouts.py"
    script.write_text(data.text("nvme_timeouts.py"))
    (tmp_path / "nvme").mkdir()
    config = tmp_path / "t.json"
    config.write_text(json.dumps({"arrays": [{"nqn": "nqn.gone", "timeouts": {"ctrl_loss_tmo": -1}}], "wait_s": 0}))
    assert runpy.run_path(str(script))["main"](str(config), str(tmp_path / "nvme")) == 1
    assert "no live controller for nqn.gone" in capsys.readouterr().err
