"""commands: one module per ``loadgen`` sub-command (run, sweep, report, compare, serve, kernel,
calibrate), each parsing its flags and calling the package that does the work; wired by loadgen/cli.py.

May import: every loadgen package, analysis and servers (this is the top of the import graph);
nothing imports commands/ but loadgen.cli.
"""
