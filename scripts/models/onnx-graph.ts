/**
 * A small builder for ONNX graphs on top of onnx-proto (the ONNX protobuf definitions for JS).
 * The model scripts use it to write real .onnx files without Python; tests use `readInitializers`
 * to read weights back from a file.
 */
import onnxProto, { type onnx } from 'onnx-proto';

const { onnx: proto } = onnxProto;

/** ONNX TensorProto.DataType codes used here. */
export const FLOAT = 1;
export const INT64 = 7;

/** Attribute values: an integer, a list of integers, a string, or `{ float }` for a float. */
export type AttributeValue = number | number[] | string | { float: number };

/** One tensor dimension: a fixed size or a symbolic name such as `batch`. */
export type Dim = number | string;

export class GraphBuilder {
  private readonly nodes: onnx.INodeProto[] = [];
  private readonly initializers: onnx.ITensorProto[] = [];
  private readonly inputs: onnx.IValueInfoProto[] = [];
  private readonly outputs: onnx.IValueInfoProto[] = [];
  private counter = 0;

  constructor(private readonly name: string) {}

  input(name: string, elemType: number, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  output(name: string, elemType: number, dims: Dim[]): string {
    this.outputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Adds a float32 or int64 initializer (stored as raw little-endian bytes) and returns its name. */
  initializer(name: string, dims: number[], data: Float32Array | BigInt64Array): string {
    const elements = dims.reduce((a, b) => a * b, 1);
    if (elements !== data.length) throw new Error(`initializer ${name}: ${data.length} values for shape [${dims}]`);
    this.initializers.push({
      name,
      dims,
      dataType: data instanceof Float32Array ? FLOAT : INT64,
      rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    });
    return name;
  }

  /** Adds a node and returns the name of its (first) output; `output` names it, otherwise a fresh name. */
  node(opType: string, inputs: string[], attributes: Record<string, AttributeValue> = {}, output?: string): string {
    const out = output ?? `${opType.toLowerCase()}_${this.counter++}`;
    this.nodes.push({
      opType,
      name: `${opType}_${this.counter++}`,
      input: inputs,
      output: [out],
      attribute: Object.entries(attributes).map(([key, value]) => attribute(key, value)),
    });
    return out;
  }

  /** Serialises the model (IR version 8, default ONNX domain at `opset`). */
  toBytes(opset: number, docString = ''): Uint8Array {
    const model = proto.ModelProto.create({
      irVersion: 8,
      producerName: 'switchyard',
      producerVersion: '1',
      docString,
      opsetImport: [{ domain: '', version: opset }],
      graph: {
        name: this.name,
        node: this.nodes,
        initializer: this.initializers,
        input: this.inputs,
        output: this.outputs,
      },
    });
    return proto.ModelProto.encode(model).finish();
  }
}

function valueInfo(name: string, elemType: number, dims: Dim[]): onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function attribute(name: string, value: AttributeValue): onnx.IAttributeProto {
  const type = proto.AttributeProto.AttributeType;
  if (typeof value === 'string') return { name, type: type.STRING, s: new TextEncoder().encode(value) };
  if (Array.isArray(value)) return { name, type: type.INTS, ints: value };
  if (typeof value === 'object') return { name, type: type.FLOAT, f: value.float };
  return { name, type: type.INT, i: value };
}

/** Reads every float32 initializer of an ONNX file back, by name, with its shape. */
export function readInitializers(bytes: Uint8Array): Map<string, { dims: number[]; data: Float32Array }> {
  const model = proto.ModelProto.decode(bytes);
  const result = new Map<string, { dims: number[]; data: Float32Array }>();
  for (const tensor of model.graph?.initializer ?? []) {
    if (tensor.dataType !== FLOAT) continue;
    const dims = (tensor.dims ?? []).map(Number);
    const raw = tensor.rawData ?? new Uint8Array();
    // Copy: protobuf byte fields may be views into a larger (and unaligned) buffer.
    const data =
      raw.length > 0 ? new Float32Array(new Uint8Array(raw).buffer) : Float32Array.from(tensor.floatData ?? []);
    result.set(tensor.name ?? '', { dims, data });
  }
  return result;
}
