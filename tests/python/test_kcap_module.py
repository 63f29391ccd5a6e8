"""The Python module kcap against traces recorded from the driver double
(ctest label "python"): tests/interpose/programs/direct_launch recorded with
`kcap record`, opened, and its launches, parameters and memory compared with
what the program wrote; damaged input gives TraceError or a partial trace
with a TraceWarning.

The hostile-trace corpus (tests/support/hostile_traces.h) is read whole,
each file in a child process under a memory limit: TraceError or a result,
never a crash.

The build passes its paths in the environment: PYTHONPATH (the module),
KCAP_TEST_KCAP, KCAP_TEST_DOUBLE_DIR, KCAP_TEST_DIRECT_LAUNCH,
KCAP_TEST_MAKE_SAMPLE, KCAP_TEST_MAKE_HOSTILE.
"""
import os
import resource
import struct
import subprocess
import sys
import warnings

import numpy
import pytest

import kcap

N = 1000  # direct_launch's kN


def record(path, *options):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCAP_") and k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = os.environ["KCAP_TEST_DOUBLE_DIR"]
    command = [os.environ["KCAP_TEST_KCAP"], "record", "-o", str(path), *options, "--",
               os.environ["KCAP_TEST_DIRECT_LAUNCH"]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(path)


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    return kcap.open(record(tmp_path_factory.mktemp("traces") / "direct.kcap"))


def test_environment_modules_kernels(direct):
    env = direct.environment
    assert env["mode"] == "full"
    assert env["devices"] and env["devices"][0]["name"]
    assert env["argv"][0].endswith("direct_launch")
    assert env["driver"] != "" and isinstance(env["driver_version"], int)
    assert direct.complete and direct.problems == []
    assert [m["api"] for m in direct.modules] == ["moduleLoadData", "moduleLoad", "moduleLoadDataEx",
                                                  "moduleLoadFatBinary"]
    kernels = {k["name"]: k["launches"] for k in direct.kernels}
    assert kernels == {"axpy": 3, "reduce_sum": 1, "scale_struct": 1, "poly_eval": 1}


def test_launches_and_parameters(direct):
    launches = direct.launches
    assert [l.kernel_name for l in launches] == ["axpy", "axpy", "axpy", "reduce_sum", "scale_struct", "poly_eval"]
    assert [l.index for l in launches] == list(range(6))
    axpy = launches[0]
    assert axpy.grid == (4, 1, 1) and axpy.block == (256, 1, 1) and axpy.shared_mem_bytes == 0
    assert axpy.ended and axpy.result == 0
    assert axpy.gpu_duration_ns is None  # not recorded with --timing
    # axpy(float a, const float* x, float* y, int n)
    assert axpy.param_layout == [(0, 4), (8, 8), (16, 8), (24, 4)]
    assert axpy.param(0) == struct.pack("<f", 2.0)
    assert axpy.param(3) == struct.pack("<i", N)
    assert len(axpy.params) == 28
    assert [p.offset for p in axpy.pointers] == [8, 16]
    x, y = (struct.unpack_from("<Q", axpy.params, off)[0] for off in (8, 16))
    assert [p.value for p in axpy.pointers] == [x, y]
    assert repr(axpy.pointers[0]) == "8:0x%x" % x  # as kcap dump shows it
    assert launches[4].stream != 0 and launches[0].stream == 0
    with pytest.raises(IndexError):
        axpy.param(4)
    assert direct.launch(3).kernel_name == "reduce_sum"


def test_buffers_hold_what_the_program_wrote(direct):
    i = numpy.arange(N, dtype=numpy.float32)
    first, _, third = direct.launches[:3]
    x_ptr, y_ptr = (p.value for p in first.pointers)
    x = first.buffer_at(x_ptr)
    assert x.has_before and x.has_after and x.size == N * 4
    assert numpy.array_equal(x.before(dtype=numpy.float32), i)
    y = first.buffer_at(y_ptr)
    assert numpy.array_equal(y.before(dtype=numpy.float32), 2 * i)
    assert numpy.array_equal(y.after(dtype=numpy.float32), 4 * i)  # y = 2x + y
    assert numpy.array_equal(third.buffer_at(y_ptr).after(dtype=numpy.float32), 8 * i)
    # A dtype and shape the caller chooses, from an offset.
    grid = y.after(dtype=numpy.float32, shape=(10, 100))
    assert grid.shape == (10, 100) and grid[1, 0] == 4 * 100
    assert y.after(dtype="float32", shape=(2,), offset=8).tolist() == [8.0, 12.0]
    assert y.after().dtype == numpy.uint8 and y.after().size == N * 4
    assert first.buffer(0).address in (x_ptr, y_ptr)

    reduce = direct.launches[3]
    out = reduce.buffer_at(reduce.pointers[1].value)
    assert out.before(dtype=numpy.float32).tolist() == [0.0]
    assert out.after(dtype=numpy.float32).tolist() == [N * (N - 1) / 2]

    scale = direct.launches[4]  # scale_struct: dst[2k] = src[2k] / 2 for k < N/2, the rest zero
    dst = scale.buffer_at(scale.pointers[1].value).after(dtype=numpy.float32)
    want = numpy.where(numpy.arange(N) % 2 == 0, i * 0.5, 0).astype(numpy.float32)
    assert numpy.array_equal(dst, want)


def test_wrong_views_are_refused(direct):
    y = direct.launches[0].buffer_at(direct.launches[0].pointers[1].value)
    with pytest.raises(ValueError, match="holds 4000"):
        y.after(dtype=numpy.float32, shape=(1001,))
    with pytest.raises(ValueError, match="not a whole number"):
        y.after(dtype=numpy.float32, offset=2)
    with pytest.raises(IndexError):
        direct.launches[0].buffer(99)
    with pytest.raises(LookupError):
        direct.launches[0].buffer_at(8)


def test_metadata_trace_has_no_memory(tmp_path):
    trace = kcap.open(record(tmp_path / "meta.kcap", "--mode", "metadata"))
    assert trace.environment["mode"] == "metadata"
    assert len(trace.launches) == 6
    assert trace.launches[0].buffers == []
    assert trace.launches[0].param(3) == struct.pack("<i", N)
    # Each launch carries its outcome (no launchEnd in this mode): result and return time.
    for launch in trace.launches:
        assert launch.ended and launch.result == 0
        assert launch.end_time_ns >= launch.time_ns


def test_bad_paths_raise_trace_errors(tmp_path):
    with pytest.raises(kcap.TraceError, match="absent.kcap"):
        kcap.open(tmp_path / "absent.kcap")
    text = tmp_path / "notes.txt"
    text.write_text("not a trace at all, but long enough to hold a header " * 4)
    with pytest.raises(kcap.TraceError, match="notes.txt"):
        kcap.open(text)
    assert issubclass(kcap.TraceError, RuntimeError)


def test_truncated_trace_gives_its_intact_launches(tmp_path):
    whole = tmp_path / "whole.kcap"
    subprocess.run([os.environ["KCAP_TEST_MAKE_SAMPLE"], str(whole), "--launches", "40"], check=True, timeout=300)
    data = whole.read_bytes()
    cut = tmp_path / "cut.kcap"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.warns(kcap.TraceWarning, match="cut.kcap"):
        trace = kcap.open(cut)
    assert trace.problems and not trace.complete
    assert 0 < len(trace.launches) < 40
    assert [l.index for l in trace.launches] == list(range(len(trace.launches)))
    readable = 0
    for launch in trace.launches:
        for buffer in launch.buffers:
            for side, present in (("before", buffer.has_before), ("after", buffer.has_after)):
                if not present:
                    continue
                try:
                    getattr(buffer, side)(dtype=numpy.float32)
                    readable += 1
                except kcap.TraceError as e:  # a piece past the cut: said clearly, nothing else
                    assert "cut.kcap" in str(e)
    assert readable > 0


def test_to_pandas_only_with_pandas(direct):
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            direct.launches.to_pandas()
    else:
        frame = direct.launches.to_pandas()
        assert list(frame["kernel_name"]) == [l.kernel_name for l in direct.launches]


def test_complete_trace_opens_without_warning(direct):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = kcap.open(direct.path)
    assert len(again.launches) == 6


# Reads everything a trace offers; prints "refused" or "read", and exits 0
# unless an exception other than the module's own errors escaped.
READ_ALL = r"""
import os, sys, warnings
import kcap
warnings.simplefilter("ignore")
path = sys.argv[1]
name = os.path.basename(path)
try:
    trace = kcap.open(path)
except kcap.TraceError as e:
    assert name in str(e), str(e)
    print("refused:", e)
    sys.exit(0)
trace.environment, trace.modules, trace.kernels, trace.problems
for launch in trace.launches:
    repr(launch), launch.params, launch.pointers, launch.grid, launch.result, launch.gpu_duration_ns
    [launch.param(i) for i in range(len(launch.param_layout))]
    for buffer in launch.buffers:
        for side in ("before", "after"):
            if getattr(buffer, "has_" + side):
                try:
                    getattr(buffer, side)()
                except kcap.TraceError as e:
                    assert name in str(e), str(e)
print("read")
"""


def limited():
    gib = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (2 * gib, 2 * gib))


def test_hostile_corpus_raises_or_reads(direct, tmp_path):
    listing = subprocess.run([os.environ["KCAP_TEST_MAKE_HOSTILE"], direct.path, str(tmp_path)], check=True,
                             capture_output=True, text=True, timeout=300).stdout
    names = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert len(names) >= 15
    outcomes = {}
    for name in names:
        done = subprocess.run([sys.executable, "-c", READ_ALL, str(tmp_path / name)], capture_output=True,
                              text=True, timeout=120, preexec_fn=limited)
        assert done.returncode == 0, "%s: %s%s" % (name, done.stdout, done.stderr)
        outcomes[name] = done.stdout.split(":")[0].strip()
    assert "refused" in outcomes.values() and "read" in outcomes.values(), outcomes
