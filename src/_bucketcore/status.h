/* The one status vocabulary of the kernels. A kernel returns BC_OK or one failure below (with the
 * index of the element it concerns); bucketcore.status.check_status turns a failure into the
 * exception the caller sees. Python reads the same values from _bucketcore._status. */
#ifndef BUCKETCORE_STATUS_H
#define BUCKETCORE_STATUS_H

typedef enum bc_status {
    BC_OK = 0,
    BC_ERR_NOMEM = 1,          /* out of memory */
    BC_ERR_KEY_TYPE = 2,       /* a key that is not str, bytes (or None where keyless is allowed) */
    BC_ERR_KEY_NONE = 3,       /* None or an Arrow null where a key is required */
    BC_ERR_SURROGATE = 4,      /* a str with a surrogate code point, errors="strict" */
    BC_ERR_KEY_TOO_LONG = 5,   /* a key longer than BC_KEY_MAX_BYTES of UTF-8 */
    BC_ERR_LIST_CHANGED = 6,   /* a key list changed size while it was read */
    BC_ERR_ARROW_OFFSETS = 7,  /* an Arrow offsets buffer that decreases or points past its data */
    BC_ERR_NEEDS_GIL = 8,      /* a legacy str met without the GIL: hash the column on one thread */
    BC_ERR_SEGMENT_INDEX = 9,  /* a segment index outside the segment list */
    BC_ERR_BUCKET_INDEX = 10,  /* a bucket index outside its segment's buckets */
    BC_ERR_GLOBAL_INDEX = 11,  /* a global bucket index outside all buckets */
    BC_ERR_NEGATIVE_SIZE = 12, /* a message size below 0 */
    BC_ERR_STAMP_RANGE = 13,   /* a stamp value outside 0..0xFFFF */
    BC_ERR_STAMP_ORDER = 14,   /* a stamp whose hash_min is above its hash_max */
    BC_ERR_ACK_UNKNOWN = 15,   /* an ack of an id that is no dispatched entry of the segment */
    BC_ERR_ACK_ALREADY = 16,   /* an ack of an entry acked before */
    BC_ERR_ACK_QUEUED = 17,    /* an ack of an entry queued for (re)delivery, not delivered */
    BC_ERR_ACK_OTHER = 18,     /* an ack of an entry delivered to another consumer */
    BC_ERR_ACK_DUPLICATE = 19, /* the same id twice in one ack call */
    BC_ERR_ARROW_VIEW = 20,    /* an Arrow string/binary view with a negative length or outside its buffers */
    BC_ERR_DICT_INDEX = 21,    /* an Arrow dictionary index outside its dictionary */
    BC_ERR_KEY_BUFFER = 22,    /* a memoryview key that is released or not C-contiguous */
    BC_ERR_NPSTRING = 23       /* a numpy StringDType item numpy could not unpack */
} bc_status;

#endif
