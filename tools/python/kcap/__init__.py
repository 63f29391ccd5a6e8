"""Read kcap traces from Python.

    import kcap, numpy
    trace = kcap.open("run.kcap")
    trace.environment["devices"][0]["name"]        # 'NVIDIA H200'
    for launch in trace.launches:
        print(launch.index, launch.kernel_name, launch.grid, launch.block)
    out = trace.launches[3].buffer(1).after(dtype=numpy.float32, shape=(64, 64))

The reading is kcap's own (the C++ library the command line uses, through
the extension module _kcap): what `kcap info` and `kcap dump` show, the
same way. Problems of the trace raise TraceError (a RuntimeError) with the
reader's message; a damaged or truncated trace opens with every intact event,
its problems in Trace.problems and a TraceWarning.
"""

import warnings

from ._kcap import Buffer, Launch, TraceError  # noqa: F401  (re-exported)
from ._kcap import Trace as _Trace

__all__ = ["open", "Trace", "Launch", "Buffer", "Pointer", "TraceError", "TraceWarning", "LaunchList"]


class TraceWarning(UserWarning):
    """The trace is damaged or truncated: it was read up to what is intact."""


class Pointer(tuple):
    """A parameter word that is a device pointer: (offset, value, allocation_base, in_tensor_map)."""

    __slots__ = ()

    def __new__(cls, offset, value, allocation_base, in_tensor_map):
        return super().__new__(cls, (offset, value, allocation_base, in_tensor_map))

    offset = property(lambda self: self[0], doc="byte offset of the word in the parameter buffer")
    value = property(lambda self: self[1], doc="the address stored there")
    allocation_base = property(lambda self: self[2], doc="the tracked allocation it falls into (0: none)")
    in_tensor_map = property(lambda self: self[3], doc="the global address of a CUtensorMap parameter")

    def __repr__(self):
        # As `kcap dump` prints a pointer: OFFSET:0xVALUE
        return "%d:0x%x%s" % (self[0], self[1], "(tensorMap)" if self[3] else "")


_LAUNCH_COLUMNS = ("index", "kernel_name", "grid", "block", "shared_mem_bytes", "stream", "device", "thread_id",
                   "time_ns", "end_time_ns", "result", "gpu_duration_ns", "capturing", "seq")


class LaunchList(list):
    """The launches of a trace, in file order (a list of Launch)."""

    def to_pandas(self):
        """A pandas DataFrame, one row a launch. Needs pandas (python3-pandas)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("LaunchList.to_pandas needs pandas (Debian: python3-pandas); "
                              "without it, use the list of launches itself") from e
        return pandas.DataFrame([{c: getattr(launch, c) for c in _LAUNCH_COLUMNS} for launch in self],
                                columns=list(_LAUNCH_COLUMNS))


def _pointers(self):
    return [Pointer(*word) for word in self._pointer_words]


def _param(self, i):
    """The bytes of parameter i, at its place in the layout the launch recorded."""
    layout = self.param_layout
    if not 0 <= i < len(layout):
        raise IndexError("launch %d has %d parameters in its recorded layout" % (self.index, len(layout)))
    offset, size = layout[i]
    return self.params[offset:offset + size]


def _buffer(self, i):
    """Recorded buffer i (Launch.buffers: the launch's pre ranges, then post ranges at other addresses)."""
    buffers = self.buffers
    if not 0 <= i < len(buffers):
        raise IndexError("launch %d has %d recorded buffers" % (self.index, len(buffers)))
    return buffers[i]


def _buffer_at(self, address):
    """The recorded buffer holding device address `address` (a pointer parameter's value, a tensor's data_ptr())."""
    for b in self.buffers:
        if b.address <= address < b.address + max(b.size, 1):
            return b
    raise LookupError("launch %d recorded no buffer holding 0x%x" % (self.index, address))


def _launch_repr(self):
    return "<kcap.Launch #%d %s grid=%s block=%s>" % (self.index, self.kernel_name, self.grid, self.block)


Launch.pointers = property(_pointers, doc="the parameter words that are device pointers, as Pointer")
Launch.param = _param
Launch.buffer = _buffer
Launch.buffer_at = _buffer_at
Launch.__repr__ = _launch_repr


class Trace:
    """An open trace. Its launches, buffers and arrays read from the file it keeps open."""

    def __init__(self, path):
        self._t = _Trace(str(path))
        self.launches = LaunchList(self._t._launches())

    path = property(lambda self: self._t.path)
    closed = property(lambda self: self._t.closed, doc="the writer closed the file (it ends with a valid index)")
    problems = property(lambda self: self._t.problems, doc="(byte offset, message) of each damage found")
    complete = property(lambda self: self._t.closed and not self._t.problems)
    environment = property(lambda self: self._t.environment,
                           doc="host, pid, argv, driver, toolkit, mode, kcap_version, devices, options, ...")
    modules = property(lambda self: self._t.modules, doc="module loads, as `kcap info` lists them")
    kernels = property(lambda self: self._t.kernels, doc="kernels in order of first launch, with launch counts")
    events = property(lambda self: self._t.events, doc="events read")

    def launch(self, index):
        """The launch whose launchIndex is `index` (the number `kcap dump` and `kcap replay` use)."""
        for launch in self.launches:
            if launch.index == index:
                return launch
        raise LookupError("%s: no launch %d" % (self.path, index))

    def __repr__(self):
        return "<kcap.Trace %s: %d launches%s>" % (self.path, len(self.launches),
                                                   "" if self.complete else ", damaged or truncated")


def open(path):  # noqa: A001  (kcap.open, as the module's entry point)
    """Opens a .kcap trace. Raises TraceError when it cannot be read at all."""
    trace = Trace(path)
    if trace.problems:
        offset, message = trace.problems[0]
        warnings.warn("%s: read up to what is intact; %d problem(s), the first at byte %d: %s"
                      % (trace.path, len(trace.problems), offset, message), TraceWarning, stacklevel=2)
    return trace
