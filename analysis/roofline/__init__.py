"""analysis.roofline: what the hardware allows, as plain arithmetic on the model and the device.

    HF config.json / sut.json "model" ─► model_spec.py (shape dict; shape_in_sut)
        ─► model_cost.py (parameters, weight and KV bytes, prefill and decode-step FLOPs and bytes)
    devices.py (spec catalogue; every figure with its evidence and source)  ─┐
    calibrate.py (this host's bandwidth and matmul rate; evidence measured;  ─┴► roofline.py
        host_load.py: load, steal, spread; a busy host re-measured or labelled)
        ─► bound(FLOPs, bytes, spec): the floor, which roof binds, MBU / MFU of a measured time
    run_device.py: the spec a run used ─► RUN/device.json at run time; read back by reports
        (``--device`` overrides it, labelled)
    run_roofline.py: records + shape + frozen spec ─► summary.json "roofline" (MBU, decode floor,
        each request's own prefill floor, broken floors)
        ─► by_concurrency.py: each inter-token gap at the requests in flight over it ─► ITL p50
        vs the floor per level; level 1 = the batch-1 decode step ("by_in_flight", "batch1")

May import: numpy (and torch / jax lazily, in calibrate). Never loadgen, analysis.metrics,
analysis.report or the server presets.
"""
