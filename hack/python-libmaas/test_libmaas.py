"""python-libmaas 0.6.8 (an independent MAAS client) against the maas-sim binary.

The simulator binary comes from $MAAS_SIM_BIN (else target/debug/maas-sim); each test module
starts one simulator on a free port and checks results through python-libmaas and through
the simulator's own /_sim/machines view.
"""

import base64
import json
import os
import pathlib
import socket
import subprocess
import tempfile
import urllib.request

import pytest
from maas.client import connect
from maas.client.bones import CallError
from maas.client.enum import NodeStatus, PowerState
from maas.client.viscera.machines import MachineNotFound

ROOT = pathlib.Path(__file__).resolve().parents[2]
API_KEY = "simconsumerkey0001:simtokenkey0000001:simtokensecret000000000000000001"
INVENTORY = """\
zones: [z1, z2]
tags: [gpu]
machines:
  - {hostname: small-a, zone: z1, cpu_count: 4, memory: 8192}
  - {hostname: small-b, zone: z2, cpu_count: 4, memory: 8192}
  - {hostname: gpu-a, zone: z1, cpu_count: 16, memory: 65536, tags: [gpu]}
  - {hostname: gpu-b, zone: z2, cpu_count: 32, memory: 131072, tags: [gpu]}
  - {hostname: big, zone: z2, cpu_count: 64, memory: 524288}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sim():
    binary = os.environ.get("MAAS_SIM_BIN", str(ROOT / "target" / "debug" / "maas-sim"))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        inventory = pathlib.Path(tmp) / "inventory.yaml"
        inventory.write_text(INVENTORY)
        proc = subprocess.Popen(
            [binary, "--listen", f"127.0.0.1:{port}", "--machines", "5", "--inventory", str(inventory),
             "--deploy-seconds", "0", "--release-seconds", "0", "--erase-seconds", "0",
             "--power-seconds", "0", "--api-key", API_KEY],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            url = None
            for line in proc.stdout:
                if line.startswith("MAAS_URL="):
                    url = line.strip().split("=", 1)[1]
                if line.startswith("MAAS_API_KEY="):
                    break
            assert url, "maas-sim did not print its URL"
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def client(sim):
    return connect(sim, apikey=API_KEY)


def sim_machines(url):
    root = url.split("/MAAS/")[0]
    with urllib.request.urlopen(f"{root}/_sim/machines") as resp:
        return {m["system_id"]: m for m in json.load(resp)}


def test_list_machines(client):
    machines = client.machines.list()
    assert len(machines) == 5
    assert {m.hostname for m in machines} == {"small-a", "small-b", "gpu-a", "gpu-b", "big"}
    assert all(m.status == NodeStatus.READY for m in machines)
    gpu = [m for m in machines if "gpu" in {t.name for t in m.tags}]
    assert {m.hostname for m in gpu} == {"gpu-a", "gpu-b"}
    assert all(m.zone.name in ("z1", "z2") for m in machines)


def test_allocate_deploy_owner_data_power_release(sim, client):
    machine = client.machines.allocate(tags=["gpu"], zone="z2", agent_name="pytest", comment="libmaas")
    assert machine.hostname == "gpu-b"
    assert machine.status == NodeStatus.ALLOCATED
    state = sim_machines(sim)[machine.system_id]
    assert (state["owner"], state["agent_name"]) == ("admin", "pytest")

    user_data = b"#cloud-config\nruncmd: [echo hi]\n"
    machine = machine.deploy(distro_series="jammy", user_data=user_data, comment="go", wait=True, wait_interval=0.1)
    assert machine.status == NodeStatus.DEPLOYED
    assert machine.distro_series == "jammy"
    state = sim_machines(sim)[machine.system_id]
    assert base64.b64decode(state["user_data"]) == user_data

    machine.owner_data = {"cluster": "c1", "role": "worker"}
    machine.save()
    machine.refresh()
    assert machine.owner_data == {"cluster": "c1", "role": "worker"}

    machine.power_off(wait=False)
    assert machine.query_power_state() == PowerState.OFF
    machine.power_on(wait=False)
    assert machine.query_power_state() == PowerState.ON

    machine.release(comment="done", erase=True, quick_erase=True, wait=True, wait_interval=0.1)
    assert machine.status == NodeStatus.READY
    state = sim_machines(sim)[machine.system_id]
    assert state["owner"] is None
    assert state["owner_data"] == {}
    assert state["agent_name"] == ""
    assert state["power_state"] == "off"


def test_allocation_errors(client):
    with pytest.raises(MachineNotFound):
        client.machines.allocate(cpus=1000)
    # python-libmaas sends not_zones as `not_in_zones`, which MAAS rejects: 400 "No such constraint."
    with pytest.raises(CallError) as err:
        client.machines.allocate(not_zones=["z1"])
    assert err.value.status == 400
    assert b"No such constraint." in err.value.content


def test_tags_zones_pools(client):
    tag = client.tags.create("ssd", comment="fast disks")
    assert tag.name == "ssd"
    machine = client.machines.list()[0]
    machine.tags.add(tag)
    machine.refresh()
    assert "ssd" in {t.name for t in machine.tags}
    assert {t.name for t in client.tags.list()} >= {"gpu", "ssd"}
    assert {z.name for z in client.zones.list()} == {"default", "z1", "z2"}
    assert "default" in {p.name for p in client.resource_pools.list()}


def test_deploy_failure_is_reported(sim, client):
    root = sim.split("/MAAS/")[0]
    req = urllib.request.Request(f"{root}/_sim/faults", data=b'{"fail_next_deploys": 1}', method="PUT")
    urllib.request.urlopen(req).read()
    machine = client.machines.allocate(cpus=4)
    with pytest.raises(Exception):
        machine.deploy(wait=True, wait_interval=0.1)
    machine.refresh()
    assert machine.status == NodeStatus.FAILED_DEPLOYMENT
    machine.release(wait=True, wait_interval=0.1)
    assert machine.status == NodeStatus.READY


def test_region_erase_setting_applies_to_a_release_that_asks_for_none(sim, client):
    assert client.maas.get_enable_disk_erasing_on_release() is False
    client.maas.set_enable_disk_erasing_on_release(True)
    try:
        assert client.maas.get_enable_disk_erasing_on_release() is True
        machine = client.machines.allocate(cpus=4, comment="erase setting")
        machine.release(comment="no erase asked", wait=True, wait_interval=0.1)
        assert machine.status == NodeStatus.READY
        last = sim_machines(sim)[machine.system_id]["releases"][-1]
        assert last["erase"] is True, last
    finally:
        client.maas.set_enable_disk_erasing_on_release(False)
    with pytest.raises(Exception):
        client.maas.get_config("no_such_setting")


def test_vm_hosts_through_pods(sim, client):
    # MAAS 3.x serves VM hosts under the pre-2.9 name python-libmaas knows: /pods/.
    pod = client.pods.create(type="lxd", power_address="10.0.0.9:8443", name="lxd-py", zone="z1", tags=["py"])
    assert (pod.type, pod.name, pod.zone.name) == ("lxd", "lxd-py", "z1")
    assert [p.name for p in client.pods.list()] == ["lxd-py"]
    assert pod.total["cores"] == 16 and pod.used["cores"] == 0

    composed = pod.compose(cores=2, memory=4096, storage="root:20", hostname="py-vm")
    system_id = composed["system_id"]
    state = sim_machines(sim)[system_id]
    assert (state["cpu_count"], state["memory"]) == (2, 4096)
    root = sim.split("/MAAS/")[0]
    with urllib.request.urlopen(f"{root}/_sim/vm-hosts") as resp:
        hosts = json.load(resp)
    assert [(h["id"], h["machines"]) for h in hosts] == [(pod.id, [system_id])]
    assert client.pods.get(pod.id).used["cores"] == 2
    machine = client.machines.get(system_id)
    assert machine.hostname == "py-vm"
    # Composed machines commission first (--commission-seconds, 5 s by default here).
    assert machine.status in (NodeStatus.COMMISSIONING, NodeStatus.READY)

    with pytest.raises(CallError) as err:
        pod.compose(cores=100)
    assert err.value.status == 503
    assert "Unable to compose KVM instance in 'lxd-py'" in err.value.content.decode()
