"""Fault injection without QEMU: the QMP client and the faults against a scripted QMP server on a unix
socket (what QEMU 7.2 sends: greeting, replies with the command's id, events in between), input checks."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from fxctl.errors import BadInput, ExitCode, FxError
from fxctl.lab import fault
from fxctl.lab.drill_data import parse_target
from fxctl.lab.qemu import QMP_SOCKET, qmp_socket
from fxctl.lab.qmp import QmpClient, QmpError, QmpRefused, QmpTimeout
from fxctl.lab.state import DriveRecord, GuestRecord, LabState, LinkRecord
from tests.support.cli import run_main

GREETING = {"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian"},
                    "capabilities": ["oob"]}}


class FakeQemu:
    """A QMP server on a unix socket: answers from `replies` (command -> return value; "Error:DESC": QMP's
    GenericError, "Error[CLASS]:DESC": another error class), sends `events_after` (command -> events) after
    the reply; records commands."""

    def __init__(self, path: Path, replies: dict | None = None, events_after: dict | None = None,
                 silent: bool = False):
        self.path, self.replies, self.events_after, self.silent = path, replies or {}, events_after or {}, silent
        self.received: list[dict] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn):
        with conn:
            if self.silent:
                time.sleep(5)
                return
            send = lambda obj: conn.sendall(json.dumps(obj).encode() + b"\r\n")  # noqa: E731
            send(GREETING)
            buffer = b""
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    self.received.append(message)
                    name = message["execute"]
                    reply = self.replies.get(name, {})
                    if isinstance(reply, str) and reply.startswith("Error"):
                        head, _, desc = reply.partition(":")
                        kind = head[len("Error["):-1] if head.startswith("Error[") else "GenericError"
                        send({"error": {"class": kind, "desc": desc}, "id": message.get("id")})
                    else:
                        send({"event": "NIC_RX_FILTER_CHANGED", "data": {}, "timestamp": {}})  # noise first
                        send({"return": reply, "id": message.get("id")})
                    for event in self.events_after.get(name, []):
                        send(event)

    def commands(self) -> list[tuple[str, dict]]:
        return [(m["execute"], m.get("arguments", {})) for m in self.received if m["execute"] != "qmp_capabilities"]

    def close(self):
        self.server.close()


@pytest.fixture
def short_dir():
    """Unix socket paths are limited to 107 bytes: pytest's tmp_path can be longer."""
    folder = Path(tempfile.mkdtemp(prefix="fxq", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lab_state(short_dir, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(short_dir))
    link = LinkRecord(0, "target1", "eth1", "52:54:00:ab:02:01", "10.99.0.2/24", 40100, False)
    drives = [DriveRecord(f"FXLABABG1D{n}", f"/x/nvme{n}.img", f"/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_FXLABABG1D{n}")
              for n in (1, 2)]
    guests = [GuestRecord("target1", "target", 1, "u1", "nqn1", 40022, "52:54:00:ab:01:00", [], drives),
              GuestRecord("initiator1", "initiator", 2, "u2", "nqn2", 40023, "52:54:00:ab:02:00", [link])]
    state = LabState("unit", "img", "/v", "/i", 1280, 1 << 28, guests)
    for guest in guests:
        (short_dir / "fxctl" / "lab" / "unit" / "guests" / guest.name).mkdir(parents=True)
    return state


def qemu_for(state: LabState, guest: str, **kwargs) -> FakeQemu:
    return FakeQemu(state.folder / "guests" / guest / QMP_SOCKET, **kwargs)


def test_a_control_socket_path_too_long_for_unix_sockets_moves_to_the_temporary_directory(tmp_path):
    deep = tmp_path / ("d" * 60) / "guests" / "initiator1"
    path = qmp_socket(deep)
    assert len(str(path)) <= 100 and path.name.startswith("fxctl-qmp-")
    assert qmp_socket(deep) == path and qmp_socket(tmp_path / "other" / ("d" * 60)) != path
    assert qmp_socket(Path("/s/lab/guests/t1")) == Path("/s/lab/guests/t1/qmp.sock")


def test_client_negotiates_executes_and_keeps_events(short_dir):
    server = FakeQemu(short_dir / "q.sock", replies={"query-status": {"status": "running"}},
                      events_after={"query-status": [{"event": "DEVICE_DELETED", "data": {"device": "nvme2"}}]})
    try:
        with QmpClient(short_dir / "q.sock", timeout_s=5) as qmp:
            assert qmp.execute("query-status") == {"status": "running"}
            assert qmp.wait_event("DEVICE_DELETED", timeout_s=0.3, match={"device": "nvme1"}) is None
            assert qmp.wait_event("DEVICE_DELETED", timeout_s=5, match={"device": "nvme2"})["data"] == {
                "device": "nvme2"}
        assert [m["execute"] for m in server.received] == ["qmp_capabilities", "query-status"]
    finally:
        server.close()


def test_qemu_error_is_raised_with_its_description(short_dir):
    server = FakeQemu(short_dir / "q.sock", replies={"device_del": "Error:Device 'nvme9' not found"})
    try:
        with QmpClient(short_dir / "q.sock", timeout_s=5) as qmp, pytest.raises(QmpError) as caught:
            qmp.execute("device_del", id="nvme9")
        assert "Device 'nvme9' not found" in caught.value.message and "GenericError" in caught.value.message
    finally:
        server.close()


def test_a_silent_qemu_times_out_and_a_missing_socket_says_how_to_get_one(short_dir):
    server = FakeQemu(short_dir / "q.sock", silent=True)
    try:
        started = time.monotonic()
        with pytest.raises(QmpTimeout, match="timed out"):
            QmpClient(short_dir / "q.sock", timeout_s=0.5).connect()
        assert time.monotonic() - started < 3
    finally:
        server.close()
    with pytest.raises(QmpError) as caught:
        QmpClient(short_dir / "absent.sock").connect()
    assert "lab down" in caught.value.hint


def test_link_cut_puts_the_link_down_then_up(lab_state):
    server = qemu_for(lab_state, "initiator1")
    waited, now = [], [100.0]

    def sleep(seconds):
        waited.append(seconds)
        now[0] += seconds

    try:
        result = fault.cut_link(lab_state, lab_state.guest("initiator1"), 12, progress=lambda _m: None,
                                sleep=sleep, clock=lambda: now[0])
    finally:
        server.close()
    assert server.commands() == [("set_link", {"name": "link0", "up": False}),
                                 ("set_link", {"name": "link0", "up": True})]
    assert result.restored and result.subject == "eth1" and result.details["peer"] == "target1"
    assert sum(waited) == pytest.approx(12) and max(waited) <= 10


def test_an_interrupted_link_cut_still_puts_the_link_up(lab_state):
    server = qemu_for(lab_state, "initiator1")

    def interrupt(_seconds):
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            fault.cut_link(lab_state, lab_state.guest("initiator1"), 30, progress=lambda _m: None, sleep=interrupt)
    finally:
        server.close()
    assert server.commands()[-1] == ("set_link", {"name": "link0", "up": True})


def test_link_cut_refuses_bad_input_before_touching_qemu(lab_state):
    initiator, target = lab_state.guest("initiator1"), lab_state.guest("target1")
    for seconds in (0, -3, 3601):
        with pytest.raises(BadInput, match="--seconds"):
            fault.cut_link(lab_state, initiator, seconds, progress=print)
    with pytest.raises(BadInput, match="no private link 'eth7'") as caught:
        fault.cut_link(lab_state, initiator, 5, netdev="eth7", progress=print)
    assert "eth1" in caught.value.hint
    with pytest.raises(BadInput, match="target1 has no private link"):
        fault.cut_link(lab_state, target, 5, progress=print)


def test_unplug_needs_consent_a_known_drive_and_waits_for_the_release(lab_state):
    target = lab_state.guest("target1")
    with pytest.raises(BadInput, match="destructive.*RAID0 has no redundancy"):
        fault.unplug_drive(lab_state, target, "FXLABABG1D2", yes=False, progress=print)
    with pytest.raises(BadInput, match="no drive 'NOPE'"):
        fault.unplug_drive(lab_state, target, "NOPE", yes=True, progress=print)
    server = qemu_for(lab_state, "target1", events_after={"device_del": [
        {"event": "DEVICE_DELETED", "data": {"path": "/machine/peripheral/nvme2/virtio-backend"}},
        {"event": "DEVICE_DELETED", "data": {"device": "nvme2", "path": "/machine/peripheral/nvme2"}}]})
    try:
        result = fault.unplug_drive(lab_state, target, "2", yes=True, progress=lambda _m: None)
    finally:
        server.close()
    assert server.commands() == [("device_del", {"id": "nvme2"})]
    assert not result.restored and "cannot be restored with its data" in result.notes[0]
    assert result.subject == "FXLABABG1D2"


def test_unplug_of_a_drive_already_pulled_is_a_clear_fault(lab_state):
    # QEMU answers device_del of an absent id with QMP's DeviceNotFound class (qdev's find_device_state)
    server = qemu_for(lab_state, "target1", replies={"device_del": "Error[DeviceNotFound]:Device 'nvme1' not found"})
    try:
        with pytest.raises(FxError, match="already pulled"):
            fault.unplug_drive(lab_state, lab_state.guest("target1"), "FXLABABG1D1", yes=True, progress=print)
    finally:
        server.close()


def test_another_refusal_of_the_unplug_is_qemus_own_error_whatever_its_words(lab_state):
    # told apart by QMP's error class, never by the text
    server = qemu_for(lab_state, "target1", replies={"device_del": "Error:bus not found"})
    try:
        with pytest.raises(QmpRefused, match="bus not found") as caught:
            fault.unplug_drive(lab_state, lab_state.guest("target1"), "FXLABABG1D1", yes=True, progress=print)
        assert caught.value.error_class == "GenericError"
    finally:
        server.close()


def test_unplug_that_the_guest_never_completes_is_bounded(lab_state):
    server = qemu_for(lab_state, "target1")
    try:
        started = time.monotonic()
        with pytest.raises(FxError, match="had not after 1 s"):
            fault.unplug_drive(lab_state, lab_state.guest("target1"), "FXLABABG1D1", yes=True, timeout_s=1,
                               progress=print)
        assert time.monotonic() - started < 4
    finally:
        server.close()


def test_a_refused_reset_puts_the_reboot_action_back(lab_state):
    server = qemu_for(lab_state, "target1", replies={"system_reset": "Error:not now"})
    try:
        with pytest.raises(QmpError, match="not now"):
            fault.reboot(lab_state, lab_state.guest("target1"), progress=print)
    finally:
        server.close()
    assert server.commands() == [("set-action", {"reboot": "reset"}), ("system_reset", {}),
                                 ("set-action", {"reboot": "shutdown"})]


def test_data_target_is_checked(lab_state):
    guest, folder = parse_target("initiator1:/mnt/kvtier/", lab_state)
    assert guest.name == "initiator1" and folder == "/mnt/kvtier"
    for bad in ("initiator1", "initiator1:mnt", "nobody:/mnt"):
        with pytest.raises(BadInput, match="--data"):
            parse_target(bad, lab_state)


@pytest.mark.parametrize("args, words", [
    (["link", "--guest", "initiator1", "--seconds", "0"], "--seconds"),
    (["link", "--guest", "initiator1", "--seconds", "ten"], "--seconds"),
    (["link", "--guest", "initiator1", "--seconds", "4000"], "--seconds"),
    (["link", "--guest", "nobody", "--seconds", "5"], "no guest 'nobody'"),
    (["reboot", "--guest", "target1", "--timeout", "-1"], "--timeout"),
    (["unplug", "--guest", "target1"], "--drive"),
    (["fill", "--guest", "initiator1", "--path", "/mnt", "--seconds", "5", "--leave", "lots"], "--leave"),
    (["write", "--data", "initiator1"], "--data must be GUEST:/DIR"),
    (["write", "--data", "initiator1:/mnt", "--data-mib", "0"], "--data-mib"),
])
def test_bad_input_exits_2_naming_what_is_wrong(lab_state, monkeypatch, capsys, args, words):
    lab_state.save()
    monkeypatch.delenv("FXCTL_LAB_NAME", raising=False)
    monkeypatch.setattr("fxctl.lab.fault.is_guest_process", lambda *_a: True)
    code, _, err = run_main(["lab", "fault", *args, "--name", "unit"], monkeypatch, capsys)
    assert code == ExitCode.BAD_INPUT, err
    assert words in err and "Traceback" not in err


def test_a_fault_on_a_stopped_guest_is_a_clear_fault(lab_state, monkeypatch, capsys):
    lab_state.save()
    code, _, err = run_main(["lab", "fault", "link", "--name", "unit", "--guest", "initiator1", "--seconds", "5"],
                            monkeypatch, capsys)
    assert code == ExitCode.HOST_FAILED and "initiator1 is not running" in err and "Traceback" not in err


def test_every_fault_command_documents_itself(monkeypatch, capsys):
    for name in ("link", "reboot", "unplug", "fill"):
        code, out, _ = run_main(["lab", "fault", name, "--help"], monkeypatch, capsys)
        assert code == 0 and "--guest" in out
    code, out, _ = run_main(["lab", "fault", "write", "--help"], monkeypatch, capsys)
    assert code == 0 and "--data" in out and "check" in out
    code, out, _ = run_main(["lab", "fault", "unplug", "--help"], monkeypatch, capsys)
    assert "cannot be restored with its data" in " ".join(out.split())
