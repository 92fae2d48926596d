"""Hand-computed vectors of docs/design.md ("Hashing"), shared by the test modules (an oracle, not code)."""

# raw (unmasked) Murmur3_32, seed 0, of each key's UTF-8 bytes
MURMUR3_VECTORS = {
    "": 0x00000000,
    "a": 0x3C2569B2,
    "key-1": 0x98B115A0,
    "some-routing-key": 0x73DFD1D5,
    "orders/customer-42": 0xF039F16A,
    "ключ": 0x9A592042,
    "键🔑": 0xA8ECFF40,
    "550e8400-e29b-41d4-a716-446655440000": 0x38D60CDC,
}
