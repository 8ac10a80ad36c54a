"""servers/vllm/describe.py: what sut.json says about a managed server — GPUs (nvidia-smi, NVML),
the vLLM version (GET /version, package metadata, `vllm --version`), the flags redacted."""
import asyncio

from aiohttp import web

from loadgen.scenario.target import ServerSpec
from servers.vllm.describe import describe_server, gpu_inventory, parse_gpu_csv, vllm_version
from tests.servers.vllm.fakes import FAKE_VLLM, exe

SMI_CSV = ("0, NVIDIA H100 80GB HBM3, 550.54.15, 81559, GPU-1a2b\n"
           "1, NVIDIA H100 80GB HBM3, 550.54.15, 81559, GPU-3c4d\n")


def test_gpu_inventory_from_nvidia_smi_and_without(bin_dir, monkeypatch, tmp_path):
    assert parse_gpu_csv(SMI_CSV) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "memory_total_mib": 81559, "uuid": "GPU-1a2b"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "memory_total_mib": 81559, "uuid": "GPU-3c4d"}]
    exe(bin_dir, "nvidia-smi", f"#!/bin/sh\nprintf '{SMI_CSV}'\n")
    inv = gpu_inventory()
    assert inv["source"] == "nvidia-smi" and [g["uuid"] for g in inv["gpus"]] == ["GPU-1a2b",
                                                                                 "GPU-3c4d"]
    exe(bin_dir, "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    inv = gpu_inventory()
    if inv.get("source") != "nvml":                      # a host with a GPU answers through NVML
        assert inv["status"] == "unavailable"
        assert "exited with 9: NVIDIA-SMI has failed" in inv["reason"]
        assert "NVML" in inv["reason"] or "nvidia-ml-py" in inv["reason"]   # either way, said
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    inv = gpu_inventory()
    if inv.get("source") != "nvml":
        assert inv["status"] == "unavailable" and "nvidia-smi not on PATH" in inv["reason"]


async def test_vllm_version_server_package_cli(bin_dir):
    fake = exe(bin_dir, "vllm", FAKE_VLLM)
    async def version(request):
        return web.json_response({"version": "0.11.0"})
    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        v = await asyncio.to_thread(vllm_version, [str(fake)], url)
    finally:
        await runner.cleanup()
    assert v["server"] == "0.11.0" and v["version"] == "0.11.0"
    assert v["cli"]["status"] == "unavailable" and "not run" in v["cli"]["reason"]
    v = vllm_version([str(fake)], "http://127.0.0.1:9")  # nothing listens on port 9
    if isinstance(v["package"], dict):                  # vllm not installed here: the CLI answers
        assert v["cli"] == "0.0.0-fake" and v["version"] == "0.0.0-fake"
        assert "no vllm distribution" in v["package"]["reason"]
    assert v["server"]["status"] == "unavailable" and "/version" in v["server"]["reason"]
    broken = exe(bin_dir, "vllm-broken", "#!/bin/sh\necho 'ImportError: libcuda' >&2\nexit 1\n")
    v = vllm_version([str(broken)], None)
    if isinstance(v["package"], dict):
        assert "exited with 1: ImportError: libcuda" in v["cli"]["reason"] and v["version"] is None


def test_describe_server_for_command_kind():
    s = ServerSpec(kind="command", command=["srv", "--port", "{port}", "--ctx", "8"],
                   env={"CUDA_VISIBLE_DEVICES": "1"})
    d = describe_server(s, ["srv", "--port", "5", "--ctx", "8", "--api-key", "sk-x"], None)
    assert d["kind"] == "command"
    assert d["flags"] == {"port": "5", "ctx": "8", "api-key": "[REDACTED]"}
    assert d["cuda_visible_devices"] == "1" and "version" not in d
    assert "gpus" in d
