"""The seed workload's Param path timed alone, and again after each other strategy on the same stream,
with the garbage collector off and after a collection: how its cost depends on what ran before.

Usage (on a CUDA machine, from the repository root): PYTHONPATH=src python3 tools/seed_param_alone.py
"""
import gc
import time

import gpugraph as gg
from gpugraph.examples import dynamic_parameters as seed

dev = gg.Device("cuda")
stream, buffers = dev.stream(), seed.Buffers(dev)
stream.launch(seed.scale, seed.BLOCKS, seed.THREADS, buffers.ping, buffers.input, 1.0, seed.N)
stream.synchronize()
def timed(name, n):
    t = time.perf_counter()
    seed.STRATEGIES[name](stream, buffers, n)
    stream.synchronize()
    return round((time.perf_counter() - t) / n * 1e6, 2)
def objs(): return len(gc.get_objects())
print("param fresh", timed("Param", 20000), objs())
gc.disable()
print("recapture", timed("recapture + update", 20000), objs(), "garbage kept:", gc.get_count())
print("param after recapture (gc off)", timed("Param", 20000), objs())
print("collected", gc.collect(), objs())
print("param after collect", timed("Param", 20000))
gc.enable()
print("no graph", timed("no graph", 20000))
print("param after no graph", timed("Param", 20000))
print("captured", timed("captured", 20000))
print("param after captured", timed("Param", 20000))
