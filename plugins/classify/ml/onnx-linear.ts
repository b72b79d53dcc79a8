/**
 * Recognises an ONNX file that is one linear layer and a softmax — `probabilities =
 * Softmax(MatMul(features, W) + b)`, the graph scripts/models/train-injection.ts exports — and
 * reads W and b out of it, so that the `linear-features` classifier can compute the logits as a
 * sparse dot product over the features a text has (a few hundred of 32 775), instead of handing
 * onnxruntime a dense vector per text. Any other graph returns undefined and runs in onnxruntime.
 *
 * A minimal protobuf reader for the fields needed (onnx.proto3): ModelProto.graph (7);
 * GraphProto node (1), initializer (5), input (11), output (12); NodeProto input (1), output (2),
 * op_type (4), attribute (5); AttributeProto name (1), i (3); TensorProto dims (1), data_type (2),
 * float_data (4), name (8), raw_data (9); ValueInfoProto name (1).
 */

export interface LinearLayer {
  /** Input width D. */
  width: number;
  /** Output classes K. */
  classes: number;
  /** W, row-major [D, K]: the weights of feature i are weights[i * K .. i * K + K). */
  weights: Float32Array;
  bias: Float32Array;
}

interface Field {
  no: number;
  wire: number;
  /** Varint value (wire 0) or the bytes (wire 2). */
  value: number;
  bytes?: Uint8Array;
}

/** The fields of one message, in order. Throws on a malformed buffer. */
function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (at >= buf.length) throw new Error('truncated varint');
      const b = buf[at++];
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
      if (scale > 2 ** 63) throw new Error('varint too long');
    }
  };
  while (at < buf.length) {
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, value: varint() });
    else if (wire === 2) {
      const len = varint();
      if (at + len > buf.length) throw new Error('truncated field');
      out.push({ no, wire, value: len, bytes: buf.subarray(at, at + len) });
      at += len;
    } else if (wire === 5) {
      out.push({ no, wire, value: 0, bytes: buf.subarray(at, at + 4) });
      at += 4;
    } else if (wire === 1) {
      out.push({ no, wire, value: 0, bytes: buf.subarray(at, at + 8) });
      at += 8;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const text = (b: Uint8Array | undefined) => new TextDecoder().decode(b);
const sub = (fs: Field[], no: number) => fs.filter((f) => f.no === no && f.bytes).map((f) => f.bytes as Uint8Array);
const name = (msg: Uint8Array) => text(sub(fields(msg), 1)[0]);

interface Tensor {
  dims: number[];
  data: Float32Array;
}

function tensor(msg: Uint8Array): { name: string; tensor?: Tensor } {
  const fs = fields(msg);
  const tensorName = text(sub(fs, 8)[0]);
  const dims: number[] = [];
  for (const f of fs.filter((x) => x.no === 1)) {
    if (f.wire === 0) dims.push(f.value);
    else if (f.bytes) for (const d of fields(packedAsFields(f.bytes))) dims.push(d.value);
  }
  const type = fs.find((f) => f.no === 2)?.value;
  if (type !== 1) return { name: tensorName }; // not float32
  const raw = sub(fs, 9)[0];
  const packed = sub(fs, 4)[0];
  const bytes = raw ?? packed;
  if (!bytes || bytes.length % 4 !== 0) return { name: tensorName };
  // Copied: the field may sit at an unaligned offset of the file's buffer. Little-endian, as ONNX stores it.
  const data = new Float32Array(bytes.length / 4);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < data.length; i++) data[i] = view.getFloat32(i * 4, true);
  return { name: tensorName, tensor: { dims, data } };
}

/** Packed varints read as a sequence of field-1 varints (so `fields` can decode them). */
function packedAsFields(bytes: Uint8Array): Uint8Array {
  const out: number[] = [];
  let at = 0;
  while (at < bytes.length) {
    out.push(0x08);
    do out.push(bytes[at]);
    while (bytes[at++] & 0x80 && at < bytes.length);
  }
  return Uint8Array.from(out);
}

interface Node {
  op: string;
  inputs: string[];
  outputs: string[];
  ints: Map<string, number>;
}

function node(msg: Uint8Array): Node {
  const fs = fields(msg);
  const ints = new Map<string, number>();
  for (const a of sub(fs, 5)) {
    const af = fields(a);
    const i = af.find((f) => f.no === 3 && f.wire === 0);
    // int64 as a varint: a negative value (axis -1) comes as 2^64 + v.
    if (i) ints.set(text(sub(af, 1)[0]), i.value >= 2 ** 63 ? i.value - 2 ** 64 : i.value);
  }
  return { op: text(sub(fs, 4)[0]), inputs: sub(fs, 1).map(text), outputs: sub(fs, 2).map(text), ints };
}

/** W and b of a `Softmax(MatMul(input, W) + b)` model, or undefined for any other graph. */
export function readLinearLayer(bytes: Uint8Array): LinearLayer | undefined {
  try {
    const graph = sub(fields(bytes), 7)[0];
    if (!graph) return undefined;
    const g = fields(graph);
    const nodes = sub(g, 1).map(node);
    const inits = new Map<string, Tensor>();
    for (const t of sub(g, 5).map(tensor)) if (t.tensor) inits.set(t.name, t.tensor);
    const inputs = sub(g, 11)
      .map(name)
      .filter((n) => !inits.has(n));
    const outputs = sub(g, 12).map(name);
    if (nodes.length !== 3 || inputs.length !== 1 || outputs.length !== 1) return undefined;
    const [matmul, add, softmax] = nodes;
    if (matmul.op !== 'MatMul' || add.op !== 'Add' || softmax.op !== 'Softmax') return undefined;
    const w = inits.get(matmul.inputs[1]);
    if (matmul.inputs[0] !== inputs[0] || !w || w.dims.length !== 2) return undefined;
    const [width, classes] = w.dims;
    const other = add.inputs[0] === matmul.outputs[0] ? add.inputs[1] : add.inputs[0];
    const b = inits.get(other);
    if (!add.inputs.includes(matmul.outputs[0]) || !b || b.data.length !== classes) return undefined;
    if (b.dims.length !== 1 && !(b.dims.length === 2 && b.dims[0] === 1)) return undefined;
    const axis = softmax.ints.get('axis') ?? -1;
    if (softmax.inputs[0] !== add.outputs[0] || (axis !== 1 && axis !== -1) || softmax.outputs[0] !== outputs[0])
      return undefined;
    if (w.data.length !== width * classes) return undefined;
    return { width, classes, weights: w.data, bias: b.data };
  } catch {
    return undefined;
  }
}
