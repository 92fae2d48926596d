/* Pulsar's wire format for stamped entries: protobuf varints and fields, the outer MessageMetadata
 * of a batch, its SingleMessageMetadata + payload records, and a bounded field reader.
 *
 * Field numbers follow pulsar-common/src/main/proto/PulsarApi.proto of apache/pulsar (commit
 * e0a31eae9d538b23ceafe04d8ad98520526089c3; the same numbers in apache/pulsar-client-cpp's
 * proto/PulsarApi.proto at 830c2b150e5256720c694801bcfe99ef785c3606). The PIP-486 stamp fields
 * entry_hash_min / entry_hash_max are not in any stored upstream revision of that file: their
 * numbers are the two constants BC_WIRE_FIELD_HASH_MIN / _MAX below (33 / 34, as reported for the
 * 5.0 proto), the only place they are defined.
 *
 * An encoded entry is what a Pulsar producer sends after its command, and what the broker stores:
 *   0x0e01 (2 bytes, magic) | CRC32C (4, big-endian) | metadata size (4, big-endian) |
 *   MessageMetadata | batch payload
 * where the CRC32C covers everything after it, and the batch payload is, per message,
 *   SingleMessageMetadata size (4, big-endian) | SingleMessageMetadata | payload.
 *
 * Every reader here checks each length against the end of its buffer before it reads: malformed
 * input gives a status and the offset where it went wrong, never a read past the end. */
#ifndef BUCKETCORE_WIRE_H
#define BUCKETCORE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* MessageMetadata */
#define BC_WIRE_MM_PRODUCER_NAME       1
#define BC_WIRE_MM_SEQUENCE_ID         2
#define BC_WIRE_MM_PUBLISH_TIME        3
#define BC_WIRE_MM_PROPERTIES          4
#define BC_WIRE_MM_PARTITION_KEY       6
#define BC_WIRE_MM_COMPRESSION         8
#define BC_WIRE_MM_UNCOMPRESSED_SIZE   9
#define BC_WIRE_MM_NUM_MESSAGES        11
#define BC_WIRE_MM_ORDERING_KEY        18
#define BC_WIRE_MM_HIGHEST_SEQUENCE_ID 24
/* the PIP-486 stamp: see the note at the top of this file */
#define BC_WIRE_FIELD_HASH_MIN 33
#define BC_WIRE_FIELD_HASH_MAX 34

/* SingleMessageMetadata */
#define BC_WIRE_SM_PROPERTIES    1
#define BC_WIRE_SM_PARTITION_KEY 2
#define BC_WIRE_SM_PAYLOAD_SIZE  3
#define BC_WIRE_SM_ORDERING_KEY  7
#define BC_WIRE_SM_SEQUENCE_ID   8

/* KeyValue */
#define BC_WIRE_KV_KEY   1
#define BC_WIRE_KV_VALUE 2

#define BC_WIRE_MAGIC        0x0e01u
#define BC_WIRE_MAGIC_BROKER 0x0e02u
/* magic + checksum + metadata size */
#define BC_WIRE_HEADER 10

/* protobuf wire types */
#define BC_PB_VARINT 0
#define BC_PB_I64    1
#define BC_PB_LEN    2
#define BC_PB_I32    5

/* reader statuses (BC_WIRE_OK = 0) */
enum bc_wire_status {
    BC_WIRE_OK = 0,
    BC_WIRE_TRUNCATED_VARINT = 1, /* a varint runs past the end */
    BC_WIRE_LONG_VARINT = 2,      /* a varint longer than 10 bytes or above 2**64 */
    BC_WIRE_LENGTH_PAST_END = 3,  /* a length-delimited field or a size reaches past the end */
    BC_WIRE_FIXED_PAST_END = 4,   /* a fixed 32/64-bit field reaches past the end */
    BC_WIRE_WIRE_TYPE = 5,        /* a wire type protobuf does not have here (groups, 6, 7) */
    BC_WIRE_FIELD_ZERO = 6,       /* field number 0 */
    BC_WIRE_SHORT_HEADER = 7,     /* fewer bytes than a 4-byte size needs */
    BC_WIRE_BAD_VALUE = 8,        /* a known field with a wire type or value it cannot have */
    BC_WIRE_BAD_STAMP = 9,        /* stamp fields that break the stamp rule (bc_wire_stamp_check) */
};

/* What is wrong with a stamp (bc_wire_stamp_check); BC_STAMP_OK = 0. */
enum bc_wire_stamp_problem {
    BC_STAMP_OK = 0,
    BC_STAMP_MIN_ALONE = 1, /* entry_hash_min without entry_hash_max */
    BC_STAMP_MAX_ALONE = 2, /* entry_hash_max without entry_hash_min */
    BC_STAMP_MIN_RANGE = 3, /* entry_hash_min above 0xFFFF */
    BC_STAMP_MAX_RANGE = 4, /* entry_hash_max above 0xFFFF */
    BC_STAMP_REVERSED = 5,  /* entry_hash_min above entry_hash_max */
};

/* ---- writing ---------------------------------------------------------------------------- */

static inline size_t bc_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *bc_put_varint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static inline char *bc_put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
    return p + 4;
}

static inline size_t bc_tag_size(uint32_t field)
{
    return bc_varint_size((uint64_t)field << 3);
}

static inline char *bc_put_tag(char *p, uint32_t field, uint32_t wire_type)
{
    return bc_put_varint(p, ((uint64_t)field << 3) | wire_type);
}

/* size of a varint field (tag + value) */
static inline size_t bc_varint_field_size(uint32_t field, uint64_t v)
{
    return bc_tag_size(field) + bc_varint_size(v);
}

/* size of a length-delimited field (tag + length + bytes) */
static inline size_t bc_len_field_size(uint32_t field, size_t n)
{
    return bc_tag_size(field) + bc_varint_size(n) + n;
}

static inline char *bc_put_varint_field(char *p, uint32_t field, uint64_t v)
{
    p = bc_put_tag(p, field, BC_PB_VARINT);
    return bc_put_varint(p, v);
}

static inline char *bc_put_len_field(char *p, uint32_t field, const char *data, size_t n)
{
    p = bc_put_tag(p, field, BC_PB_LEN);
    p = bc_put_varint(p, n);
    if (n)
        memcpy(p, data, n);
    return p + n;
}

/* One message of an entry, as the encoder takes it. key_kind: 0 none, 1 partition key (a str's
 * UTF-8), 2 ordering key (bytes). Properties are props[prop_start .. prop_start + prop_count). */
typedef struct {
    const char *payload;
    size_t payload_len;
    const char *key;
    size_t key_len;
    int key_kind;
    size_t prop_start;
    size_t prop_count;
    uint64_t sequence_id;
    size_t single; /* size of its SingleMessageMetadata, set by bc_entry_measure */
} bc_wire_msg;

typedef struct {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} bc_wire_kv;

/* One entry: messages msgs[msg_start .. msg_start + msg_count), its outer sequence id, the stamp. */
typedef struct {
    size_t msg_start;
    size_t msg_count;
    uint64_t sequence_id;
    uint32_t hash_min;
    uint32_t hash_max;
} bc_wire_entry;

/* The fields common to every entry of one call. */
typedef struct {
    const char *producer_name;
    size_t producer_name_len;
    uint64_t publish_time;
    int stamp; /* write the stamp fields */
} bc_wire_common;

static inline size_t bc_kv_size(const bc_wire_kv *kv)
{
    return bc_len_field_size(BC_WIRE_KV_KEY, kv->key_len) +
           bc_len_field_size(BC_WIRE_KV_VALUE, kv->value_len);
}

/* Size of a message's SingleMessageMetadata. */
static inline size_t bc_single_size(const bc_wire_msg *m, const bc_wire_kv *props)
{
    size_t n = 0;
    for (size_t i = 0; i < m->prop_count; i++)
        n += bc_len_field_size(BC_WIRE_SM_PROPERTIES, bc_kv_size(&props[m->prop_start + i]));
    if (m->key_kind == 1)
        n += bc_len_field_size(BC_WIRE_SM_PARTITION_KEY, m->key_len);
    n += bc_varint_field_size(BC_WIRE_SM_PAYLOAD_SIZE, m->payload_len);
    if (m->key_kind == 2)
        n += bc_len_field_size(BC_WIRE_SM_ORDERING_KEY, m->key_len);
    n += bc_varint_field_size(BC_WIRE_SM_SEQUENCE_ID, m->sequence_id);
    return n;
}

static inline char *bc_put_single(char *p, const bc_wire_msg *m, const bc_wire_kv *props, size_t size)
{
    p = bc_put_be32(p, (uint32_t)size);
    for (size_t i = 0; i < m->prop_count; i++) {
        const bc_wire_kv *kv = &props[m->prop_start + i];
        p = bc_put_tag(p, BC_WIRE_SM_PROPERTIES, BC_PB_LEN);
        p = bc_put_varint(p, bc_kv_size(kv));
        p = bc_put_len_field(p, BC_WIRE_KV_KEY, kv->key, kv->key_len);
        p = bc_put_len_field(p, BC_WIRE_KV_VALUE, kv->value, kv->value_len);
    }
    if (m->key_kind == 1)
        p = bc_put_len_field(p, BC_WIRE_SM_PARTITION_KEY, m->key, m->key_len);
    p = bc_put_varint_field(p, BC_WIRE_SM_PAYLOAD_SIZE, m->payload_len);
    if (m->key_kind == 2)
        p = bc_put_len_field(p, BC_WIRE_SM_ORDERING_KEY, m->key, m->key_len);
    p = bc_put_varint_field(p, BC_WIRE_SM_SEQUENCE_ID, m->sequence_id);
    if (m->payload_len)
        memcpy(p, m->payload, m->payload_len);
    return p + m->payload_len;
}

static inline size_t bc_metadata_size(const bc_wire_entry *e, const bc_wire_common *c, size_t batch)
{
    size_t n = bc_len_field_size(BC_WIRE_MM_PRODUCER_NAME, c->producer_name_len) +
               bc_varint_field_size(BC_WIRE_MM_SEQUENCE_ID, e->sequence_id) +
               bc_varint_field_size(BC_WIRE_MM_PUBLISH_TIME, c->publish_time) +
               bc_varint_field_size(BC_WIRE_MM_COMPRESSION, 0) +
               bc_varint_field_size(BC_WIRE_MM_UNCOMPRESSED_SIZE, batch) +
               bc_varint_field_size(BC_WIRE_MM_NUM_MESSAGES, e->msg_count);
    if (c->stamp)
        n += bc_varint_field_size(BC_WIRE_FIELD_HASH_MIN, e->hash_min) +
             bc_varint_field_size(BC_WIRE_FIELD_HASH_MAX, e->hash_max);
    return n;
}

/* Measure an entry: sets each message's `single` size, the batch payload's size (*batch) and
 * returns the whole entry's encoded size (header, metadata, batch payload). */
static inline size_t bc_entry_measure(const bc_wire_entry *e, const bc_wire_common *c, bc_wire_msg *msgs,
                                      const bc_wire_kv *props, size_t *batch)
{
    size_t n = 0;
    for (size_t i = 0; i < e->msg_count; i++) {
        bc_wire_msg *m = &msgs[e->msg_start + i];
        m->single = bc_single_size(m, props);
        n += 4 + m->single + m->payload_len;
    }
    *batch = n;
    return BC_WIRE_HEADER + bc_metadata_size(e, c, n) + n;
}

/* Write one measured entry at p (exactly the size bc_entry_measure returned; `batch` is the batch
 * size it gave); the checksum bytes are left zero for the caller, who computes the CRC32C of
 * p + 6 .. end. Returns the end. */
static inline char *bc_put_entry(char *p, const bc_wire_entry *e, const bc_wire_common *c,
                                 const bc_wire_msg *msgs, const bc_wire_kv *props, size_t batch)
{
    size_t meta = bc_metadata_size(e, c, batch);
    p[0] = (char)(BC_WIRE_MAGIC >> 8);
    p[1] = (char)(BC_WIRE_MAGIC & 0xFF);
    memset(p + 2, 0, 4);
    p = bc_put_be32(p + 6, (uint32_t)meta);
    p = bc_put_len_field(p, BC_WIRE_MM_PRODUCER_NAME, c->producer_name, c->producer_name_len);
    p = bc_put_varint_field(p, BC_WIRE_MM_SEQUENCE_ID, e->sequence_id);
    p = bc_put_varint_field(p, BC_WIRE_MM_PUBLISH_TIME, c->publish_time);
    p = bc_put_varint_field(p, BC_WIRE_MM_COMPRESSION, 0);
    p = bc_put_varint_field(p, BC_WIRE_MM_UNCOMPRESSED_SIZE, batch);
    p = bc_put_varint_field(p, BC_WIRE_MM_NUM_MESSAGES, e->msg_count);
    if (c->stamp) {
        p = bc_put_varint_field(p, BC_WIRE_FIELD_HASH_MIN, e->hash_min);
        p = bc_put_varint_field(p, BC_WIRE_FIELD_HASH_MAX, e->hash_max);
    }
    for (size_t i = 0; i < e->msg_count; i++) {
        const bc_wire_msg *m = &msgs[e->msg_start + i];
        p = bc_put_single(p, m, props, m->single);
    }
    return p;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Read a varint at buf[*pos], buf[0..end). On success *pos moves past it. */
static inline int bc_get_varint(const uint8_t *buf, size_t end, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    size_t p = *pos;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return BC_WIRE_TRUNCATED_VARINT;
        uint8_t b = buf[p++];
        if (shift == 63 && b > 1)
            return BC_WIRE_LONG_VARINT;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pos = p;
            *out = v;
            return BC_WIRE_OK;
        }
    }
    return BC_WIRE_LONG_VARINT;
}

static inline uint32_t bc_get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* One field of a protobuf message: number, wire type, its varint / fixed value (for those wire
 * types), and always the [start, start + len) span of its value's bytes, so that an error about
 * any field can name where its value lies. */
typedef struct {
    uint32_t field;
    uint32_t wire_type;
    uint64_t value;
    size_t start;
    size_t len;
} bc_pb_field;

/* Read the field at buf[*pos] of a message ending at `end`. On failure *pos is where the bad part
 * starts (the caller reports it). */
static inline int bc_pb_next(const uint8_t *buf, size_t end, size_t *pos, bc_pb_field *f)
{
    size_t p = *pos;
    uint64_t tag;
    int st = bc_get_varint(buf, end, &p, &tag);
    if (st)
        return st;
    if ((tag >> 3) == 0)
        return BC_WIRE_FIELD_ZERO;
    if ((tag >> 3) > 0x1FFFFFFF)
        return BC_WIRE_LONG_VARINT;
    f->field = (uint32_t)(tag >> 3);
    f->wire_type = (uint32_t)(tag & 7);
    switch (f->wire_type) {
    case BC_PB_VARINT:
        *pos = p;
        st = bc_get_varint(buf, end, &p, &f->value);
        if (st)
            return st;
        f->start = *pos;
        f->len = p - *pos;
        break;
    case BC_PB_I64:
    case BC_PB_I32: {
        size_t n = f->wire_type == BC_PB_I64 ? 8 : 4;
        if (end - p < n) {
            *pos = p;
            return BC_WIRE_FIXED_PAST_END;
        }
        f->value = 0;
        for (size_t i = 0; i < n; i++)
            f->value |= (uint64_t)buf[p + i] << (8 * i);
        f->start = p;
        f->len = n;
        p += n;
        break;
    }
    case BC_PB_LEN: {
        uint64_t n;
        *pos = p;
        st = bc_get_varint(buf, end, &p, &n);
        if (st)
            return st;
        if (n > (uint64_t)(end - p)) {
            return BC_WIRE_LENGTH_PAST_END;
        }
        f->start = p;
        f->len = (size_t)n;
        p += (size_t)n;
        break;
    }
    default:
        *pos = p;
        return BC_WIRE_WIRE_TYPE;
    }
    *pos = p;
    return BC_WIRE_OK;
}

/* Where an entry's MessageMetadata and batch payload lie: skips a broker entry metadata prefix
 * (magic 0x0e02) and the checksum header when present. *crc_at is the offset of the stored
 * CRC32C (or (size_t)-1 when the entry has none), *meta the metadata's span, *payload where the
 * batch payload starts. *err_at is the offset of what was wrong on failure. */
static inline int bc_wire_locate(const uint8_t *buf, size_t len, size_t *crc_at, size_t *meta,
                                 size_t *meta_len, size_t *payload, size_t *err_at)
{
    size_t p = 0;
    if (len >= 2 && ((uint32_t)buf[0] << 8 | buf[1]) == BC_WIRE_MAGIC_BROKER) {
        if (len - 2 < 4) {
            *err_at = 2;
            return BC_WIRE_SHORT_HEADER;
        }
        uint32_t n = bc_get_be32(buf + 2);
        if ((uint64_t)n > (uint64_t)(len - 6)) {
            *err_at = 2;
            return BC_WIRE_LENGTH_PAST_END;
        }
        p = 6 + (size_t)n;
    }
    *crc_at = (size_t)-1;
    if (len - p >= 2 && ((uint32_t)buf[p] << 8 | buf[p + 1]) == BC_WIRE_MAGIC) {
        if (len - p - 2 < 4) {
            *err_at = p + 2;
            return BC_WIRE_SHORT_HEADER;
        }
        *crc_at = p + 2;
        p += 6;
    }
    if (len - p < 4) {
        *err_at = p;
        return BC_WIRE_SHORT_HEADER;
    }
    uint32_t m = bc_get_be32(buf + p);
    if ((uint64_t)m > (uint64_t)(len - p - 4)) {
        *err_at = p;
        return BC_WIRE_LENGTH_PAST_END;
    }
    *meta = p + 4;
    *meta_len = m;
    *payload = p + 4 + m;
    return BC_WIRE_OK;
}

/* The broker's fast path: the stamp of a MessageMetadata buf[0..len), skipping every other field
 * without interpreting it. *found has bit 0 set when entry_hash_min was present, bit 1 for max. */
static inline int bc_wire_stamp(const uint8_t *buf, size_t len, uint64_t *hash_min, uint64_t *hash_max,
                                int *found, size_t *err_at)
{
    size_t p = 0;
    bc_pb_field f;
    *found = 0;
    while (p < len) {
        int st = bc_pb_next(buf, len, &p, &f);
        if (st) {
            *err_at = p;
            return st;
        }
        if (f.field == BC_WIRE_FIELD_HASH_MIN || f.field == BC_WIRE_FIELD_HASH_MAX) {
            if (f.wire_type != BC_PB_VARINT) {
                *err_at = p;
                return BC_WIRE_BAD_VALUE;
            }
            if (f.field == BC_WIRE_FIELD_HASH_MIN) {
                *hash_min = f.value;
                *found |= 1;
            } else {
                *hash_max = f.value;
                *found |= 2;
            }
        }
    }
    return BC_WIRE_OK;
}

/* The stamp rule, the one every reader applies (the stamp fast paths and the full decoder): both
 * stamp fields or neither, each in 0..0xFFFF, entry_hash_min <= entry_hash_max. `found` has bit 0
 * set when entry_hash_min is present and bit 1 for entry_hash_max, as bc_wire_stamp sets it.
 * Returns BC_STAMP_OK or the first problem found, in the enum's order. */
static inline int bc_wire_stamp_check(int found, uint64_t hash_min, uint64_t hash_max)
{
    if (found == 1)
        return BC_STAMP_MIN_ALONE;
    if (found == 2)
        return BC_STAMP_MAX_ALONE;
    if (found == 0)
        return BC_STAMP_OK;
    if (hash_min > 0xFFFF)
        return BC_STAMP_MIN_RANGE;
    if (hash_max > 0xFFFF)
        return BC_STAMP_MAX_RANGE;
    if (hash_min > hash_max)
        return BC_STAMP_REVERSED;
    return BC_STAMP_OK;
}

#endif
