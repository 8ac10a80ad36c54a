"""What a run's sut.json says about the server, read for the report.

    sut.json ─► server_info()         the server's own description (JAX GET /info), or {}
             ─► launch_description()  (kind, what loadgen recorded when it started the server:
                                       servers.vllm.describe.describe_server's flags, version, GPUs)
             ─► model_shape()         the first dict with n_layers and dim (the roofline's input)
             ─► server_software()     the server side of the versions row, and where each came from
             ─► precision()           the dtype: the server's own, else the launch flags, else
                                       why not

sut.json's layout belongs to the runner (target URL, /v1/models, managed server /info, host,
versions; ``server_info`` = the server's GET /info); other layouts are searched by key name
(``find_key``). A missing fact reads ``not recorded`` with the reason, never a guess.
"""
from __future__ import annotations

from typing import Any, Optional

from analysis.contract.launch import LaunchDescription, Unavailable, VllmVersion
from analysis.contract.target import Sut
from analysis.roofline.model_spec import shape_in_sut


def find_key(tree: Any, *names: str) -> Any:
    """The first non-None value stored under any of ``names``, searching nested dicts/lists
    breadth-first (names tried in order at each level)."""
    level = [tree]
    while level:
        nxt = []
        for node in level:
            if isinstance(node, dict):
                for n in names:
                    if node.get(n) is not None:
                        return node[n]
                nxt.extend(v for v in node.values() if isinstance(v, (dict, list)))
            elif isinstance(node, list):
                nxt.extend(v for v in node if isinstance(v, (dict, list)))
        level = nxt
    return None


def model_shape(sut: dict) -> Optional[dict]:
    """The first dict in sut.json that looks like a model shape (has n_layers and dim), else None
    (the roofline's own search: analysis.roofline.model_spec.shape_in_sut)."""
    return shape_in_sut(sut)


def server_info(sut: dict | Sut) -> dict:
    """The server's own description (JAX /info) from sut.json, or {} for a server without one."""
    raw = sut.as_dict() if isinstance(sut, Sut) else sut
    info = Sut.read(sut).server_info or find_key(raw, "server_info", "info")
    return info if isinstance(info, dict) else {}


def launch_description(sut: dict | Sut) -> tuple[Optional[str], LaunchDescription]:
    """(kind, description) of a server loadgen started itself: sut.json's ``managed_server.sut``
    (servers.vllm.describe.describe_server: flags, version, GPUs) read as
    contract/launch.py LaunchDescription, or (None, an empty one) for an external server."""
    ms = Sut.read(sut).managed_server
    if ms is None:
        return None, LaunchDescription()
    return ms.kind, LaunchDescription.read(ms.sut if isinstance(ms.sut, dict) else {})


def version_sources(ver: VllmVersion) -> tuple[tuple[Any, str], ...]:
    """(answer, where it came from) of each way vLLM's version was asked, in order."""
    return ((ver.server, "GET /version"), (ver.package, "package metadata"),
            (ver.cli, "vllm --version"))


def server_software(sut: dict | Sut, info: dict) -> tuple[dict, list[str]]:
    """({name: version text}, [where each came from]) for the server side of the versions row:
    the server's /info (``*version`` keys), the managed server's recorded version (GET /version,
    package metadata or ``vllm --version``), an external server's GET /version, the header."""
    server = {k: v for k, v in info.items() if k.endswith("version") and isinstance(v, str)}
    sources = ["server /info"] if server else []
    kind, desc = launch_description(sut)
    ver = desc.version
    if ver is not None and isinstance(ver.version, str):
        how = next((label for said, label in version_sources(ver) if said == ver.version),
                   "recorded at launch")
        server[kind or "server"] = f"{ver.version} ({how})"
        sources.append(f"{kind or 'server'} {how}")
    elif ver is not None:
        server[kind or "server"] = "version not recorded (" + "; ".join(
            str(said.reason) for said, _ in version_sources(ver)
            if isinstance(said, Unavailable)) + ")"
    typed = Sut.read(sut)
    own = typed.server_version
    if (own is not None and isinstance(own.version, str)
            and not any(own.version in str(v) for v in server.values())):
        src = own.source or "GET /version"
        server["version"] = f"{own.version} ({src})"
        sources.append(src)
    elif own is not None and own.reason and not server:
        server["version"] = f"not recorded: {own.reason}"
    header = (typed.response_headers or {}).get("server")        # HTTP headers: a mapping
    if header:
        server["server header"] = header
        sources.append("response header")
    return server, sources


def precision(info: dict, sut: dict) -> tuple[str, str]:
    """(precision text, evidence): the server's own dtype (/info), else the dtype loadgen
    launched it with (``--dtype``, plus ``--quantization`` / ``--kv-cache-dtype``), else why not."""
    kind, desc = launch_description(sut)
    flags = desc.flags                                      # by flag name: a mapping
    extra = [f"{name} {flags[flag]} (--{flag})" for flag, name in
             (("quantization", "quantization"), ("kv-cache-dtype", "KV cache"))
             if isinstance(flags.get(flag), str)]
    if info.get("dtype"):
        return ", ".join([str(info["dtype"]), *extra]), "recorded (server)"
    if isinstance(flags.get("dtype"), str):
        return (", ".join([f"{flags['dtype']} (--dtype given at launch)", *extra]),
                "recorded (launch flags)")
    if kind == "vllm":
        return ("not recorded: vLLM was started without --dtype (its default 'auto' takes the "
                "checkpoint config's torch_dtype, which loadgen did not read)"
                + "".join(f"; {e}" for e in extra)), "unmeasured"
    return "not recorded: the server did not report its dtype", "unmeasured"
