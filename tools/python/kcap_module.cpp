// _kcap: the Python binding of the trace reader (tools/python/kcap/__init__.py
// is the module users import). It reads through the library the command line
// uses: TraceReader for the file and memory contents, summarizeTrace for the
// environment, modules and kernels (what `kcap info` shows), LaunchTable for
// each launch with its end and timing.
//
// Everything a Trace hands out keeps the trace open (a shared TraceState);
// the Python interpreter's lock serializes the calls into the reader, which
// is not thread-safe. Errors of the trace are TraceError (a RuntimeError)
// with the reader's message, which names the file and byte offset.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <kj/exception.h>

#include "common.h"
#include "errors.h"
#include "launch_table.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace py = pybind11;

namespace kcap::python {
namespace {

using format::LaunchRecord;

struct TraceState {
  std::unique_ptr<format::TraceReader> reader;
  format::TraceSummary summary;
  format::LaunchTable table{true};
};

// One recorded range of device memory a launch could reach: its content
// before the launch (Launch.pre) and after it (LaunchEnd.post), as far as the
// trace's mode recorded them.
// Content read from the trace, handed to numpy through the buffer protocol
// (numpy.frombuffer keeps it alive) without a copy.
struct ContentBytes {
  std::vector<uint8_t> data;
};

struct Buffer {
  std::shared_ptr<TraceState> state;
  size_t launch = 0;  // index in the table
  uint64_t launchIndex = 0;
  uint64_t address = 0;
  uint64_t allocationBase = 0;
  std::string kind;
  std::optional<size_t> pre;   // index in launch.pre
  std::optional<size_t> post;  // index in launchEnd.post
  uint64_t size = 0;

  const LaunchRecord& record() const { return state->table.launches()[launch]; }

  schema::Content::Reader content(bool after) const {
    const LaunchRecord& r = record();
    if (after) {
      if (!post) {
        throw py::value_error("launch " + std::to_string(launchIndex) + ": no content recorded after it at " +
                              tools::hex(address) + " (" + mode() + ")");
      }
      return r.end()->getPost()[static_cast<unsigned>(*post)].getContent();
    }
    if (!pre) {
      throw py::value_error("launch " + std::to_string(launchIndex) + ": no content recorded before it at " +
                            tools::hex(address) + " (" + mode() + ")");
    }
    return r.launch()->getPre()[static_cast<unsigned>(*pre)].getContent();
  }

  std::string mode() const {
    const auto begin = state->summary.traceBegin();
    if (!begin) return "the trace has no traceBegin";
    return "the trace was recorded in mode " + tools::enumName(begin->getCaptureMode());
  }

  // The content as an array of `dtype` (numpy's uint8 when None) and `shape`
  // (all of it from `offset` when None), read from the trace on each call.
  // numpy is used through its Python API only: a pybind11 older than
  // numpy 2 misreads numpy 2's dtype structure (an item size of 0).
  py::object read(bool after, const py::object& dtype, const py::object& shape, uint64_t offset) const {
    const schema::Content::Reader c = content(after);
    const py::module_ numpy = py::module_::import("numpy");
    const py::object type = numpy.attr("dtype")(dtype.is_none() ? py::str("uint8") : dtype);
    const auto item = type.attr("itemsize").cast<uint64_t>();
    if (item == 0) throw py::value_error("a dtype of itemsize 0 cannot view memory");
    if (offset > c.getSize()) {
      throw py::value_error("offset " + std::to_string(offset) + " is past the buffer's " +
                            std::to_string(c.getSize()) + " bytes");
    }
    uint64_t count = 0;
    py::tuple dims;
    if (shape.is_none()) {
      if ((c.getSize() - offset) % item != 0) {
        throw py::value_error(std::to_string(c.getSize() - offset) + " bytes from offset " + std::to_string(offset) +
                              " are not a whole number of " + std::to_string(item) + "-byte elements; give a shape");
      }
      count = (c.getSize() - offset) / item;
      dims = py::make_tuple(count);
    } else {
      dims = py::isinstance<py::int_>(shape) ? py::make_tuple(shape) : py::tuple(shape);
      count = 1;
      for (const auto d : dims) {
        const auto n = d.cast<int64_t>();
        if (n < 0) throw py::value_error("a negative dimension in the shape");
        if (n != 0 && count > UINT64_MAX / static_cast<uint64_t>(n)) throw py::value_error("the shape is too large");
        count *= static_cast<uint64_t>(n);
      }
      if (count > (c.getSize() - offset) / item) {
        throw py::value_error("the shape needs " + std::to_string(count * item) + " bytes from offset " +
                              std::to_string(offset) + "; the buffer at " + tools::hex(address) + " holds " +
                              std::to_string(c.getSize()));
      }
    }
    // All of it is read (content pieces are compressed whole), through
    // readContent's checks (every piece present, the size within what this
    // process can hold) before anything is allocated, and handed to numpy
    // without a copy. A window smaller than the whole is copied out, so
    // that a small array does not keep a large buffer alive.
    const std::string what = "the buffer at " + tools::hex(address) + " of launch " + std::to_string(launchIndex);
    auto bytes = std::make_unique<ContentBytes>();
    bytes->data = state->reader->readContent(c, format::kMaxContentInMemory, what.c_str());
    const auto held = bytes->data.size();
    const py::object whole = numpy.attr("frombuffer")(py::cast(std::move(bytes)), "uint8");
    py::object window = whole;
    if (offset != 0 || count * item != held) {
      window =
          whole[py::slice(static_cast<py::ssize_t>(offset), static_cast<py::ssize_t>(offset + count * item), 1)].attr(
              "copy")();
    }
    return window.attr("view")(type).attr("reshape")(dims);
  }
};

struct Launch {
  std::shared_ptr<TraceState> state;
  size_t at = 0;  // index in the table

  const LaunchRecord& r() const { return state->table.launches()[at]; }

  std::vector<Buffer> buffers() const {
    std::vector<Buffer> out;
    const LaunchRecord& rec = r();
    const auto add = [&](schema::MemoryRange::Reader range, bool post, size_t i) {
      for (Buffer& b : out) {
        if (b.address == range.getAddress()) {
          (post ? b.post : b.pre) = i;
          return;
        }
      }
      Buffer b;
      b.state = state;
      b.launch = at;
      b.launchIndex = rec.launchIndex;
      b.address = range.getAddress();
      b.allocationBase = range.getAllocationBase();
      b.kind = tools::enumName(range.getKind());
      b.size = range.getContent().getSize();
      (post ? b.post : b.pre) = i;
      out.push_back(std::move(b));
    };
    if (const auto l = rec.launch()) {
      for (unsigned i = 0; i < l->getPre().size(); ++i) add(l->getPre()[i], false, i);
    }
    if (const auto e = rec.end()) {
      for (unsigned i = 0; i < e->getPost().size(); ++i) add(e->getPost()[i], true, i);
    }
    return out;
  }

  py::bytes params() const {
    const auto p = r().launch()->getParams();
    return {reinterpret_cast<const char*>(p.begin()), p.size()};
  }
};

py::dict environment(const TraceState& s) {
  py::dict env;
  const auto b = s.summary.traceBegin();
  if (!b) return env;
  py::list argv;
  for (const auto a : b->getArgv()) argv.append(std::string(a.cStr()));
  const auto pairs = [](capnp::List<schema::KeyValue>::Reader list) {
    py::list out;  // a list of pairs: keys may repeat
    for (const auto kv : list) out.append(py::make_tuple(std::string(kv.getKey().cStr()), kv.getValue().cStr()));
    return out;
  };
  py::list devices;
  for (const auto d : b->getDevices()) {
    py::dict dev;
    dev["ordinal"] = d.getOrdinal();
    dev["name"] = d.getName().cStr();
    dev["uuid"] = tools::uuidText(d.getUuid());
    dev["compute_capability"] = py::make_tuple(d.getComputeCapabilityMajor(), d.getComputeCapabilityMinor());
    dev["total_memory_bytes"] = d.getTotalMemoryBytes();
    dev["multiprocessors"] = d.getMultiprocessorCount();
    dev["pci_bus_id"] = d.getPciBusId().cStr();
    devices.append(dev);
  }
  env["host"] = b->getHostName().cStr();
  env["pid"] = b->getProcessId();
  env["argv"] = argv;
  env["driver"] = tools::versionText(b->getDriverVersion());
  env["driver_version"] = b->getDriverVersion();
  env["toolkit"] = tools::versionText(b->getRuntimeVersion());
  env["runtime_version"] = b->getRuntimeVersion();
  env["mode"] = tools::enumName(b->getCaptureMode());
  env["kcap_version"] = b->getKcapVersion().cStr();
  env["start_unix_ns"] = b->getStartUnixNs();
  env["devices"] = devices;
  env["options"] = pairs(b->getOptions());
  env["libraries"] = pairs(b->getLibraries());
  env["environment"] = pairs(b->getEnvironment());
  return env;
}

std::shared_ptr<TraceState> openTrace(const std::string& path) {
  auto s = std::make_shared<TraceState>();
  s->reader = format::TraceReader::open(path);
  s->summary = format::summarizeTrace(*s->reader);
  s->table = format::readLaunchTable(*s->reader, true);
  return s;
}

// Returns std::nullopt-able values as None.
template <typename T>
py::object optional(bool known, T value) {
  return known ? py::cast(value) : py::none();
}

}  // namespace
}  // namespace kcap::python

PYBIND11_MODULE(_kcap, m) {
  using namespace kcap::python;
  namespace tools = kcap::tools;
  m.doc() = "Reads kcap traces through kcap's own reader (import kcap, not this module)";

  // FormatError and Cap'n Proto's kj::Exception (which the reader's checks
  // keep from happening) both become TraceError with their message.
  static py::exception<kcap::format::FormatError>& traceError =
      py::register_exception<kcap::format::FormatError>(m, "TraceError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kj::Exception& e) {
      const std::string text = std::string("malformed trace data: ") + e.getDescription().cStr();
      PyErr_SetString(traceError.ptr(), text.c_str());
    }
  });

  py::class_<ContentBytes>(m, "_ContentBytes", py::buffer_protocol()).def_buffer([](ContentBytes& b) {
    return py::buffer_info(b.data.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                           {static_cast<py::ssize_t>(b.data.size())}, {static_cast<py::ssize_t>(1)}, false);
  });
  py::class_<Buffer>(m, "Buffer")
      .def_readonly("address", &Buffer::address)
      .def_readonly("allocation_base", &Buffer::allocationBase)
      .def_readonly("kind", &Buffer::kind)
      .def_readonly("size", &Buffer::size)
      .def_property_readonly("has_before", [](const Buffer& b) { return b.pre.has_value(); })
      .def_property_readonly("has_after", [](const Buffer& b) { return b.post.has_value(); })
      .def(
          "before",
          [](const Buffer& b, const py::object& dtype, const py::object& shape, uint64_t offset) {
            return b.read(false, dtype, shape, offset);
          },
          py::arg("dtype") = py::none(), py::arg("shape") = py::none(), py::arg("offset") = 0)
      .def(
          "after",
          [](const Buffer& b, const py::object& dtype, const py::object& shape, uint64_t offset) {
            return b.read(true, dtype, shape, offset);
          },
          py::arg("dtype") = py::none(), py::arg("shape") = py::none(), py::arg("offset") = 0)
      .def("__repr__", [](const Buffer& b) {
        return "<kcap.Buffer " + tools::hex(b.address) + " " + std::to_string(b.size) + " bytes " + b.kind +
               (b.pre ? " before" : "") + (b.post ? " after" : "") + ">";
      });

  py::class_<Launch>(m, "Launch")
      .def_property_readonly("index", [](const Launch& l) { return l.r().launchIndex; })
      .def_property_readonly("seq", [](const Launch& l) { return l.r().seq; })
      .def_property_readonly("time_ns", [](const Launch& l) { return l.r().timeNs; })
      .def_property_readonly("thread_id", [](const Launch& l) { return l.r().threadId; })
      .def_property_readonly("kernel_name", [](const Launch& l) { return l.r().kernelName; })
      .def_property_readonly("function", [](const Launch& l) { return l.r().function; })
      .def_property_readonly("stream", [](const Launch& l) { return l.r().stream; })
      .def_property_readonly("device", [](const Launch& l) { return l.r().device; })
      .def_property_readonly("api", [](const Launch& l) { return tools::enumName(l.r().launch()->getApi()); })
      .def_property_readonly(
          "grid", [](const Launch& l) { return py::make_tuple(l.r().grid[0], l.r().grid[1], l.r().grid[2]); })
      .def_property_readonly(
          "block", [](const Launch& l) { return py::make_tuple(l.r().block[0], l.r().block[1], l.r().block[2]); })
      .def_property_readonly("shared_mem_bytes", [](const Launch& l) { return l.r().sharedMemBytes; })
      .def_property_readonly("capturing", [](const Launch& l) { return l.r().capturing; })
      .def_property_readonly("ended", [](const Launch& l) { return l.r().ended; })
      .def_property_readonly("result", [](const Launch& l) { return optional(l.r().ended, l.r().result); })
      .def_property_readonly("end_time_ns", [](const Launch& l) { return optional(l.r().ended, l.r().endTimeNs); })
      .def_property_readonly("gpu_start_ns", [](const Launch& l) { return optional(l.r().timed, l.r().gpuStartNs); })
      .def_property_readonly("gpu_end_ns", [](const Launch& l) { return optional(l.r().timed, l.r().gpuEndNs); })
      .def_property_readonly("gpu_duration_ns",
                             [](const Launch& l) { return optional(l.r().timed, l.r().gpuEndNs - l.r().gpuStartNs); })
      .def_property_readonly("params", &Launch::params)
      .def_property_readonly("param_layout",
                             [](const Launch& l) {
                               py::list out;
                               for (const auto p : l.r().launch()->getParamLayout()) {
                                 out.append(py::make_tuple(p.getOffset(), p.getSize()));
                               }
                               return out;
                             })
      .def_property_readonly(
          "_pointer_words",
          [](const Launch& l) {
            py::list out;  // (offset, value, allocation_base, in_tensor_map)
            for (const auto w : l.r().launch()->getPointers()) {
              out.append(py::make_tuple(w.getOffset(), w.getValue(), w.getAllocationBase(), w.getInTensorMap()));
            }
            return out;
          })
      .def_property_readonly("buffers", &Launch::buffers);

  py::class_<TraceState, std::shared_ptr<TraceState>>(m, "Trace")
      .def(py::init(&openTrace), py::arg("path"))
      .def_property_readonly("path", [](const TraceState& s) { return s.reader->path(); })
      .def_property_readonly("closed", [](const TraceState& s) { return s.reader->closed(); })
      .def_property_readonly("problems",
                             [](const TraceState& s) {
                               py::list out;
                               for (const auto& p : s.reader->problems())
                                 out.append(py::make_tuple(p.offset, p.message));
                               return out;
                             })
      .def_property_readonly("environment", [](const TraceState& s) { return environment(s); })
      .def_property_readonly("events", [](const TraceState& s) { return s.summary.events; })
      .def_property_readonly("modules",
                             [](const TraceState& s) {
                               py::list out;
                               for (const auto& mod : s.summary.modules) {
                                 py::dict d;
                                 d["handle"] = mod.handle;
                                 d["library"] = mod.isLibrary;
                                 d["api"] = mod.api;
                                 d["image_kind"] = mod.imageKind;
                                 d["image_bytes"] = mod.imageBytes;
                                 d["path"] = mod.path;
                                 d["globals"] = mod.globals;
                                 d["result"] = mod.result;
                                 d["unloaded"] = mod.unloaded;
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("kernels",
                             [](const TraceState& s) {
                               py::list out;
                               for (const auto& k : s.summary.kernels) {
                                 py::dict d;
                                 d["name"] = k.name;
                                 d["launches"] = k.launches;
                                 d["first_launch"] = k.firstLaunchIndex;
                                 d["timed_launches"] = k.durationsNs.size();
                                 d["gpu_total_ns"] = k.totalNs;
                                 out.append(d);
                               }
                               return out;
                             })
      .def("_launches", [](const std::shared_ptr<TraceState>& s) {
        std::vector<Launch> out;
        for (size_t i = 0; i < s->table.launches().size(); ++i) out.push_back(Launch{s, i});
        return out;
      });
}
