#!/usr/bin/python3
"""Writes the stateful models Triton's Python client sequence examples expect
(simple_{http,grpc}_sequence_sync_infer_client.py, simple_grpc[_aio]_sequence_stream_infer_client.py)
as ONNX models with config.pbtxt, into a model repository served by `inferd serve`.

  simple_sequence       INT32 INPUT [1] → OUTPUT = READY * (INPUT + START); controls START and
                        READY (int32). No CORRID, so string (UUID) correlation IDs work too.
  simple_dyna_sequence  as simple_sequence, plus END and CORRID (uint64) controls:
                        OUTPUT = READY * (INPUT + START + END * CORRID) (the example's `--dyna`).
  simple_accumulator    a stateful model with implicit state (not used by the examples):
                        OUTPUT = INPUT + (START ? 0 : STATE), STATE carried between requests.

The examples' outputs are what these formulas give (the first request adds 1, the last request of
a dyna sequence adds its correlation ID). simple_string_dyna_sequence needs a string CORRID
control input, which inferd does not support; it is not written.

Usage: scripts/triton/write_sequence_models.py REPOSITORY
"""
import pathlib
import sys

import onnx
from onnx import TensorProto, helper

BATCH = 8


def _value(name, elem):
    return helper.make_tensor_value_info(name, elem, ["batch", 1])


def _save(repo, name, nodes, inputs, outputs, initializers, config):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    folder = pathlib.Path(repo) / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    (folder / "config.pbtxt").write_text(config)


def _control(name, kind, values="int32_false_true: [ 0, 1 ]"):
    return f'    {{ name: "{name}" control [ {{ kind: {kind} {values} }} ] }}'


def _config(name, controls, extra=""):
    joined = ",\n".join(controls)
    return f"""name: "{name}"
backend: "onnxruntime"
max_batch_size: {BATCH}
sequence_batching {{
  max_sequence_idle_microseconds: 5000000
  oldest {{ max_candidate_sequences: 16 max_queue_delay_microseconds: 100 }}
  control_input [
{joined}
  ]
{extra}}}
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def write_simple_sequence(repo):
    nodes = [
        helper.make_node("Add", ["INPUT", "START"], ["sum"]),
        helper.make_node("Mul", ["sum", "READY"], ["OUTPUT"]),
    ]
    inputs = [_value(n, TensorProto.INT32) for n in ("INPUT", "START", "READY")]
    config = _config("simple_sequence", [
        _control("START", "CONTROL_SEQUENCE_START"),
        _control("READY", "CONTROL_SEQUENCE_READY"),
    ])
    _save(repo, "simple_sequence", nodes, inputs, [_value("OUTPUT", TensorProto.INT32)], [],
          config)


def write_simple_dyna_sequence(repo):
    nodes = [
        helper.make_node("Cast", ["CORRID"], ["corrid"], to=TensorProto.INT32),
        helper.make_node("Mul", ["END", "corrid"], ["end_id"]),
        helper.make_node("Add", ["INPUT", "START"], ["sum0"]),
        helper.make_node("Add", ["sum0", "end_id"], ["sum"]),
        helper.make_node("Mul", ["sum", "READY"], ["OUTPUT"]),
    ]
    inputs = [_value(n, TensorProto.INT32) for n in ("INPUT", "START", "END", "READY")]
    inputs.append(_value("CORRID", TensorProto.UINT64))
    config = _config("simple_dyna_sequence", [
        _control("START", "CONTROL_SEQUENCE_START"),
        _control("END", "CONTROL_SEQUENCE_END"),
        _control("READY", "CONTROL_SEQUENCE_READY"),
        _control("CORRID", "CONTROL_SEQUENCE_CORRID", "data_type: TYPE_UINT64"),
    ])
    _save(repo, "simple_dyna_sequence", nodes, inputs, [_value("OUTPUT", TensorProto.INT32)], [],
          config)


def write_simple_accumulator(repo):
    one = helper.make_tensor("one", TensorProto.INT32, [1], [1])
    nodes = [
        helper.make_node("Sub", ["one", "START"], ["keep"]),
        helper.make_node("Mul", ["STATE_IN", "keep"], ["prev"]),
        helper.make_node("Add", ["INPUT", "prev"], ["OUTPUT"]),
        helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"]),
    ]
    inputs = [_value(n, TensorProto.INT32) for n in ("INPUT", "START", "STATE_IN")]
    outputs = [_value(n, TensorProto.INT32) for n in ("OUTPUT", "STATE_OUT")]
    state = """  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32
              dims: [ 1 ] initial_state: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true
              name: "zero" } } ]
"""
    config = _config("simple_accumulator", [_control("START", "CONTROL_SEQUENCE_START")], state)
    _save(repo, "simple_accumulator", nodes, inputs, outputs, [one], config)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_simple_sequence(sys.argv[1])
    write_simple_dyna_sequence(sys.argv[1])
    write_simple_accumulator(sys.argv[1])


if __name__ == "__main__":
    main()
