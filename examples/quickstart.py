"""Hash a few keys the way a Pulsar producer does and show where each one goes."""

import bucketcore as bc

keys = ["key-1", "orders/customer-42", "ключ", "键🔑", None]
hashes = bc.hash_keys(keys)

print(f"bucketcore {bc.__version__}")
print(f"{'key':<22} {'raw':>10} {'segment':>8} {'bucket':>7}")
for key, raw, segment, bucket, has_key in zip(
    keys, hashes.raw, hashes.segment_hash, hashes.bucket_hash, hashes.has_key
):
    label = repr(key) if has_key else "(keyless)"
    print(f"{label:<22} 0x{int(raw):08x} 0x{int(segment):04x}   0x{int(bucket):04x}")
