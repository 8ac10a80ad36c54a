"""analysis.roofline: what the hardware allows, as plain arithmetic on the model and the device.

    HF config.json / sut.json "model" ─► model_spec.py (shape dict)
        ─► model_cost.py (parameters, weight and KV bytes, prefill and decode-step FLOPs and bytes)
    devices.py (spec catalogue; every figure with its evidence and source)  ─┐
    calibrate.py (this host's bandwidth and matmul rate; evidence measured) ─┴► roofline.py
        ─► bound(FLOPs, bytes, spec): the floor, which roof binds, MBU / MFU of a measured time

May import: numpy (and torch / jax lazily, in calibrate). Never loadgen, never the server presets.
"""
