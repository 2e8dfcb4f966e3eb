/* kfk.records._accel: the record v2 codec's per-record loops in C (an optional build; see accelerator.py).

Each function here is a drop-in for a pure-Python function that stays the reference implementation:

    decode_records  for batch.decode_records_python  (a batch's record list -> records)
    encode_record   for builder.encode_record_python  (one record, length prefix included)
    encode_values   for builder.encode_values_python  (MemoryRecordsBuilder.append_values' loop)
    stamp_produced_batch  for batch.stamp_produced_batch_python  (a produced batch checked and stamped in place)

Equal inputs give equal results and equal errors (the same CorruptRecordError with the same message, in the same
order of checks); tests/records/test_accelerator.py compares the two on random and malformed input. Every read is
bounded by the length of the buffer (as Python's IndexError bounds the reference), never by a length field.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The batch format's bounds, as batch.py defines them. */
#define MIN_RECORD_SIZE 7
#define MAX_VARINT_SIZE 5

static PyObject *CorruptRecordError; /* kfk.errors.CorruptRecordError, looked up once at import */
static PyObject *RecordType;         /* kfk.records.record.Record: decode_records' default record_type */

/* --- reading -------------------------------------------------------------------------------------------------- */

/* An unsigned 32-bit varint at *position (kfk.common.varint's read_unsigned_varint, its messages included). */
static int
read_unsigned_varint(const unsigned char *data, Py_ssize_t size, Py_ssize_t *position, uint64_t *result)
{
    Py_ssize_t p = *position;
    uint64_t value = 0;
    for (int shift = 0; shift < 28; shift += 7, p++) {
        if (p >= size) {
            PyErr_SetString(CorruptRecordError, "buffer ends inside a varint");
            return -1;
        }
        unsigned char byte = data[p];
        if (byte < 0x80) {
            *result = value | ((uint64_t)byte << shift);
            *position = p + 1;
            return 0;
        }
        value |= (uint64_t)(byte & 0x7F) << shift;
    }
    if (p >= size) {
        PyErr_SetString(CorruptRecordError, "buffer ends inside a varint");
        return -1;
    }
    unsigned char byte = data[p];
    if (byte >= 0x80) {
        PyErr_SetString(CorruptRecordError, "varint is longer than 5 bytes");
        return -1;
    }
    value |= (uint64_t)byte << 28;
    if (value > 0xFFFFFFFFu) {
        PyErr_SetString(CorruptRecordError, "varint does not fit in 32 bits");
        return -1;
    }
    *result = value;
    *position = p + 1;
    return 0;
}

/* An unsigned 64-bit varint at *position (read_unsigned_varlong). */
static int
read_unsigned_varlong(const unsigned char *data, Py_ssize_t size, Py_ssize_t *position, uint64_t *result)
{
    Py_ssize_t p = *position;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7, p++) {
        if (p >= size) {
            PyErr_SetString(CorruptRecordError, "buffer ends inside a varlong");
            return -1;
        }
        unsigned char byte = data[p];
        if (byte < 0x80) {
            if (shift == 63 && byte > 1) {
                PyErr_SetString(CorruptRecordError, "varlong does not fit in 64 bits");
                return -1;
            }
            *result = value | ((uint64_t)byte << shift);
            *position = p + 1;
            return 0;
        }
        if (shift < 63) {
            value |= (uint64_t)(byte & 0x7F) << shift;
        }
    }
    PyErr_SetString(CorruptRecordError, "varlong is longer than 10 bytes");
    return -1;
}

/* A record field's varint as the reference decodes it: one and two bytes inline (a payload that ends there "ends
   inside a record"), longer ones by the full reader, whose own messages then apply. */
static inline int
read_field(const unsigned char *data, Py_ssize_t size, Py_ssize_t *position, int64_t *result, int is_long)
{
    Py_ssize_t p = *position;
    uint64_t raw;
    if (p >= size) {
        goto truncated;
    }
    raw = data[p];
    if (raw < 0x80) {
        *position = p + 1;
    }
    else {
        if (p + 1 >= size) {
            goto truncated;
        }
        if (data[p + 1] < 0x80) {
            raw = (raw & 0x7F) | ((uint64_t)data[p + 1] << 7);
            *position = p + 2;
        }
        else if ((is_long ? read_unsigned_varlong : read_unsigned_varint)(data, size, position, &raw) < 0) {
            return -1;
        }
    }
    *result = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
truncated:
    PyErr_SetString(CorruptRecordError, "Record payload ends inside a record");
    return -1;
}

/* base + delta as a Python int; past int64 (a corrupt delta on a large base) the reference's big-int sum. */
static PyObject *
add_to_base(int64_t base, int64_t delta)
{
    if (delta >= 0 ? base <= INT64_MAX - delta : base >= INT64_MIN - delta) {
        return PyLong_FromLongLong(base + delta);
    }
    PyObject *left = PyLong_FromLongLong(base), *right = PyLong_FromLongLong(delta), *total = NULL;
    if (left != NULL && right != NULL) {
        total = PyNumber_Add(left, right);
    }
    Py_XDECREF(left);
    Py_XDECREF(right);
    return total;
}

/* The record's headers into the (empty) list `headers`, as batch._decode_headers reads them. */
static int
decode_headers(const unsigned char *data, Py_ssize_t size, Py_ssize_t *position, Py_ssize_t record_end,
               int64_t header_count, PyObject *headers)
{
    Py_ssize_t p = *position;
    for (int64_t index = 0; index < header_count; index++) {
        uint64_t raw;
        if (read_unsigned_varint(data, size, &p, &raw) < 0) {
            return -1;
        }
        int64_t key_length = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        if (key_length < 0 || p + key_length > record_end) {
            PyErr_Format(CorruptRecordError, "Record header key length %lld is impossible", (long long)key_length);
            return -1;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)data + p, (Py_ssize_t)key_length, "surrogateescape");
        if (key == NULL) {
            return -1;
        }
        p += (Py_ssize_t)key_length;
        if (read_unsigned_varint(data, size, &p, &raw) < 0) {
            Py_DECREF(key);
            return -1;
        }
        int64_t value_length = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        PyObject *value;
        if (value_length >= 0) {
            if (p + value_length > record_end) {
                PyErr_Format(CorruptRecordError, "Record header value length %lld exceeds the payload",
                             (long long)value_length);
                Py_DECREF(key);
                return -1;
            }
            value = PyBytes_FromStringAndSize((const char *)data + p, (Py_ssize_t)value_length);
            if (value == NULL) {
                Py_DECREF(key);
                return -1;
            }
            p += (Py_ssize_t)value_length;
        }
        else if (value_length == -1) {
            value = Py_NewRef(Py_None);
        }
        else {
            PyErr_Format(CorruptRecordError, "Record header value length %lld is negative", (long long)value_length);
            Py_DECREF(key);
            return -1;
        }
        PyObject *header = PyTuple_New(2);
        if (header == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            return -1;
        }
        PyTuple_SET_ITEM(header, 0, key);
        PyTuple_SET_ITEM(header, 1, value);
        int failed = PyList_Append(headers, header);
        Py_DECREF(header);
        if (failed) {
            return -1;
        }
    }
    *position = p;
    return 0;
}

/* A `record_type` instance (a tuple subclass without fields of its own: a NamedTuple) holding `count` items, whose
   references it steals; NULL (with the items released) on failure. What tuple.__new__(record_type, items) makes. */
static PyObject *
new_record(PyTypeObject *record_type, PyObject **items, Py_ssize_t count)
{
#if PY_VERSION_HEX < 0x030E0000
    /* Through 3.13 a tuple subtype's instance is tp_alloc'ed and filled, as tuple.__new__ does it. */
    PyObject *record = record_type == &PyTuple_Type ? PyTuple_New(count) : record_type->tp_alloc(record_type, count);
    if (record == NULL) {
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_DECREF(items[i]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyTuple_SET_ITEM(record, i, items[i]);
    }
    return record;
#else
    /* Later tuples carry more state than tp_alloc sets up: go through tuple.__new__ itself. */
    PyObject *plain = PyTuple_New(count);
    if (plain == NULL) {
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_DECREF(items[i]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyTuple_SET_ITEM(plain, i, items[i]);
    }
    if (record_type == &PyTuple_Type) {
        return plain;
    }
    PyObject *args = PyTuple_Pack(1, plain);
    Py_DECREF(plain);
    if (args == NULL) {
        return NULL;
    }
    PyObject *record = PyTuple_Type.tp_new(record_type, args, NULL);
    Py_DECREF(args);
    return record;
#endif
}

PyDoc_STRVAR(decode_records_doc,
"decode_records(data, records_count, base_offset, base_timestamp, log_append_time, start=0, end=None, *,\n"
"               record_type=Record, labels=None)\n--\n\n"
"batch.decode_records_python in C: an iterator over the records, all decoded before the first is returned.");

static PyObject *
decode_records(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"data", "records_count", "base_offset", "base_timestamp", "log_append_time", "start",
                               "end", "record_type", "labels", NULL};
    Py_buffer view;
    long long records_count, base_offset, base_timestamp;
    PyObject *log_append_time, *end_object = Py_None, *record_type_object = NULL, *labels = Py_None;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*LLLO|nO$OO:decode_records", keywords, &view, &records_count,
                                     &base_offset, &base_timestamp, &log_append_time, &start, &end_object,
                                     &record_type_object, &labels)) {
        return NULL;
    }
    PyObject *records = NULL, *label_items[4] = {NULL, NULL, NULL, NULL};
    const unsigned char *data = view.buf;
    const Py_ssize_t size = view.len;
    Py_ssize_t end = size;
    if (end_object != Py_None && (end = PyNumber_AsSsize_t(end_object, PyExc_OverflowError)) == -1
            && PyErr_Occurred()) {
        goto done;
    }
    if (start < 0 || start > end || end > size) {
        PyErr_Format(PyExc_ValueError, "Record payload bounds %zd..%zd are outside the %zd-byte buffer", start, end,
                     size);
        goto done;
    }
    if (record_type_object == NULL) {
        record_type_object = RecordType;
    }
    if (!PyType_Check(record_type_object)
            || !PyType_IsSubtype((PyTypeObject *)record_type_object, &PyTuple_Type)
            || ((PyTypeObject *)record_type_object)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass without fields of its own");
        goto done;
    }
    PyTypeObject *record_type = (PyTypeObject *)record_type_object;
    if (labels != Py_None) {
        if (!PyTuple_Check(labels) || PyTuple_GET_SIZE(labels) != 4) {
            PyErr_SetString(PyExc_TypeError, "labels must be a tuple of four items");
            goto done;
        }
        for (int i = 0; i < 4; i++) {
            label_items[i] = PyTuple_GET_ITEM(labels, i);
        }
    }
    /* Every record takes MIN_RECORD_SIZE bytes of [start, end) at least: no more can decode successfully. */
    Py_ssize_t capacity = (end - start) / MIN_RECORD_SIZE;
    if (records_count < capacity) {
        capacity = records_count < 0 ? 0 : (Py_ssize_t)records_count;
    }
    records = PyList_New(capacity);
    if (records == NULL) {
        goto done;
    }
    Py_ssize_t position = start;
    for (long long index = 0; index < records_count; index++) {
        int64_t length, timestamp_delta, offset_delta, key_length, value_length, header_count;
        if (read_field(data, size, &position, &length, 0) < 0) {
            goto fail;
        }
        Py_ssize_t record_end = position + (Py_ssize_t)length;
        if (length < MIN_RECORD_SIZE - 1 || record_end > end) {
            PyErr_Format(CorruptRecordError, "Record length %lld is impossible at payload position %zd",
                         (long long)length, position);
            goto fail;
        }
        unsigned char attributes = data[position++]; /* position < record_end <= size: length is at least 6 */
        if (read_field(data, size, &position, &timestamp_delta, 1) < 0
                || read_field(data, size, &position, &offset_delta, 0) < 0
                || read_field(data, size, &position, &key_length, 0) < 0) {
            goto fail;
        }
        PyObject *key, *value, *headers;
        if (key_length >= 0) {
            if (key_length > record_end - position) {
                PyErr_Format(CorruptRecordError, "Record key length %lld exceeds its record", (long long)key_length);
                goto fail;
            }
            key = PyBytes_FromStringAndSize((const char *)data + position, (Py_ssize_t)key_length);
            if (key == NULL) {
                goto fail;
            }
            position += (Py_ssize_t)key_length;
        }
        else if (key_length == -1) {
            key = Py_NewRef(Py_None);
        }
        else {
            PyErr_Format(CorruptRecordError, "Record key length %lld is negative", (long long)key_length);
            goto fail;
        }
        if (read_field(data, size, &position, &value_length, 0) < 0) {
            Py_DECREF(key);
            goto fail;
        }
        if (value_length >= 0) {
            if (value_length > record_end - position) {
                PyErr_Format(CorruptRecordError, "Record value length %lld exceeds its record",
                             (long long)value_length);
                Py_DECREF(key);
                goto fail;
            }
            value = PyBytes_FromStringAndSize((const char *)data + position, (Py_ssize_t)value_length);
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            position += (Py_ssize_t)value_length;
        }
        else if (value_length == -1) {
            value = Py_NewRef(Py_None);
        }
        else {
            PyErr_Format(CorruptRecordError, "Record value length %lld is negative", (long long)value_length);
            Py_DECREF(key);
            goto fail;
        }
        if (read_field(data, size, &position, &header_count, 0) < 0 || (headers = PyList_New(0)) == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto fail;
        }
        if (header_count != 0) {
            int failed = header_count < 0 || header_count > record_end - position;
            if (failed) {
                PyErr_Format(CorruptRecordError, "Record header count %lld is impossible", (long long)header_count);
            }
            if (failed || decode_headers(data, size, &position, record_end, header_count, headers) < 0) {
                Py_DECREF(key);
                Py_DECREF(value);
                Py_DECREF(headers);
                goto fail;
            }
        }
        if (position != record_end) {
            PyErr_Format(CorruptRecordError, "Record declares %lld bytes but its fields take %lld", (long long)length,
                         (long long)(length + (position - record_end)));
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto fail;
        }
        PyObject *offset = add_to_base(base_offset, offset_delta);
        PyObject *timestamp = log_append_time != Py_None ? Py_NewRef(log_append_time)
                                                         : add_to_base(base_timestamp, timestamp_delta);
        PyObject *record;
        if (offset == NULL || timestamp == NULL) {
            Py_XDECREF(offset);
            Py_XDECREF(timestamp);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto fail;
        }
        if (labels == Py_None) {
            PyObject *attributes_object = PyLong_FromLong(attributes); /* a small int: never fails */
            PyObject *items[6] = {offset, timestamp, key, value, headers, attributes_object};
            record = new_record(record_type, items, 6);
        }
        else {
            PyObject *items[9] = {Py_NewRef(label_items[0]), Py_NewRef(label_items[1]), offset, timestamp,
                                  Py_NewRef(label_items[2]), key, value, headers, Py_NewRef(label_items[3])};
            record = new_record(record_type, items, 9);
        }
        if (record == NULL) {
            goto fail;
        }
        if (index < capacity) {
            PyList_SET_ITEM(records, (Py_ssize_t)index, record);
        }
        else {  /* unreachable by the bound above; kept so that a wrong bound cannot write past the list */
            Py_DECREF(record);
            PyErr_SetString(PyExc_SystemError, "decode_records: more records than the payload can hold");
            goto fail;
        }
    }
    if (position != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes are left after the last of %lld records", end - position,
                     records_count);
        goto fail;
    }
    {
        PyObject *iterator = PyObject_GetIter(records);
        Py_DECREF(records);
        records = iterator;
    }
    goto done;
fail:
    /* Slots not filled yet are NULL, which list deallocation skips. */
    Py_CLEAR(records);
done:
    PyBuffer_Release(&view);
    return records;
}

/* --- writing -------------------------------------------------------------------------------------------------- */

/* A growable byte buffer on the C heap: filling it never runs Python code, so the inputs cannot change under it. */
typedef struct {
    unsigned char *data;
    Py_ssize_t length;
    Py_ssize_t capacity;
} Output;

static int
output_reserve(Output *output, Py_ssize_t extra)
{
    if (output->length + extra <= output->capacity) {
        return 0;
    }
    Py_ssize_t capacity = output->capacity ? output->capacity : 256;
    while (capacity < output->length + extra) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    unsigned char *data = PyMem_Realloc(output->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    output->data = data;
    output->capacity = capacity;
    return 0;
}

static inline uint64_t
zigzag(int64_t value)
{
    return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
}

static inline int
unsigned_size(uint64_t raw)
{
    int size = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        size++;
    }
    return size;
}

static inline unsigned char *
put_unsigned(unsigned char *out, uint64_t raw)
{
    while (raw >= 0x80) {
        *out++ = (unsigned char)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (unsigned char)raw;
    return out;
}

/* A signed 32-bit quantity (a length or an offset delta) as a varint's zig-zag value; encode_varint's error past
   the int32 range. */
static inline int
varint_raw(int64_t value, uint64_t *raw)
{
    if (value < INT32_MIN || value > INT32_MAX) {
        PyErr_Format(CorruptRecordError, "varint out of range: %lld", (long long)value);
        return -1;
    }
    *raw = zigzag(value);
    return 0;
}

/* A key, value or header value: NULL data for None, else a buffer view (released by release_field). */
typedef struct {
    Py_buffer view;
    int present;
} Field;

static int
get_field(PyObject *object, Field *field)
{
    field->present = object != Py_None;
    if (!field->present) {
        return 0;
    }
    return PyObject_GetBuffer(object, &field->view, PyBUF_SIMPLE);
}

static void
release_field(Field *field)
{
    if (field->present) {
        PyBuffer_Release(&field->view);
        field->present = 0;
    }
}

/* The zig-zag value of a field's length (-1 for None) and the field's size once encoded. */
static inline int
field_size(const Field *field, uint64_t *length_raw, Py_ssize_t *encoded)
{
    if (!field->present) {
        *length_raw = 1; /* -1 */
        *encoded = 1;
        return 0;
    }
    if (varint_raw(field->view.len, length_raw) < 0) {
        return -1;
    }
    *encoded = unsigned_size(*length_raw) + field->view.len;
    return 0;
}

static inline unsigned char *
put_field(unsigned char *out, const Field *field, uint64_t length_raw)
{
    out = put_unsigned(out, length_raw);
    if (field->present) {
        memcpy(out, field->view.buf, (size_t)field->view.len);
        out += field->view.len;
    }
    return out;
}

/* The timestamp delta's zig-zag value; encode_varlong's error for one outside int64 (a Python int may be). */
static int
timestamp_raw(PyObject *timestamp_delta, uint64_t *raw)
{
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(timestamp_delta, &overflow);
    if (overflow) {
        PyErr_Format(CorruptRecordError, "varlong out of range: %S", timestamp_delta);
        return -1;
    }
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    *raw = zigzag(value);
    return 0;
}

/* One header's key encoded as the reference encodes it: header_key.encode("utf-8", "surrogateescape"). */
static PyObject *
encode_header_key(PyObject *header_key)
{
    if (PyUnicode_CheckExact(header_key)) {
        return PyUnicode_AsEncodedString(header_key, "utf-8", "surrogateescape");
    }
    return PyObject_CallMethod(header_key, "encode", "ss", "utf-8", "surrogateescape");
}

PyDoc_STRVAR(encode_record_doc,
"encode_record(offset_delta, timestamp_delta, key, value, headers)\n--\n\n"
"builder.encode_record_python in C: one record's bytes, its length prefix included.");

static PyObject *
encode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "encode_record() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *headers_object = args[4], *headers = NULL, *result = NULL;
    Output output = {NULL, 0, 0};
    Field key = {.present = 0}, value = {.present = 0};
    uint64_t time_raw, offset_raw, key_raw, value_raw;
    Py_ssize_t key_size, value_size;
    long long offset_delta = PyLong_AsLongLong(args[0]);
    if ((offset_delta == -1 && PyErr_Occurred()) || timestamp_raw(args[1], &time_raw) < 0
            || varint_raw(offset_delta, &offset_raw) < 0 || get_field(args[2], &key) < 0
            || field_size(&key, &key_raw, &key_size) < 0 || get_field(args[3], &value) < 0
            || field_size(&value, &value_raw, &value_size) < 0) {
        goto done;
    }
    Py_ssize_t header_count = 0;
    if (headers_object != Py_None) {  /* the reference treats a false `headers` as none */
        int truth = PyObject_IsTrue(headers_object);
        /* A tuple of them: encoding a header key may run Python code, which must not change what is iterated. */
        if (truth < 0 || (truth && (headers = PySequence_Tuple(headers_object)) == NULL)) {
            goto done;
        }
        header_count = headers != NULL ? PyTuple_GET_SIZE(headers) : 0;
    }
    Py_ssize_t fixed = 1 + unsigned_size(time_raw) + unsigned_size(offset_raw) + key_size + value_size;
    if (header_count == 0) {
        /* The common record: its size is known before writing, so it is written straight into its bytes object. */
        uint64_t body_raw;
        if (varint_raw(fixed + 1, &body_raw) < 0) {
            goto done;
        }
        result = PyBytes_FromStringAndSize(NULL, unsigned_size(body_raw) + fixed + 1);
        if (result != NULL) {
            unsigned char *out = put_unsigned((unsigned char *)PyBytes_AS_STRING(result), body_raw);
            *out++ = 0; /* attributes */
            out = put_unsigned(out, time_raw);
            out = put_unsigned(out, offset_raw);
            out = put_field(out, &key, key_raw);
            out = put_field(out, &value, value_raw);
            *out = 0; /* no headers */
        }
        goto done;
    }
    /* With headers, the body goes after room for the longest length prefix, which is written last, right before
       the body. */
    Py_ssize_t body_start = MAX_VARINT_SIZE;
    if (output_reserve(&output, body_start + fixed) < 0) {
        goto done;
    }
    unsigned char *out = output.data + body_start;
    *out++ = 0; /* attributes */
    out = put_unsigned(out, time_raw);
    out = put_unsigned(out, offset_raw);
    out = put_field(out, &key, key_raw);
    out = put_field(out, &value, value_raw);
    output.length = out - output.data;
    uint64_t count_raw;
    if (varint_raw(header_count, &count_raw) < 0 || output_reserve(&output, MAX_VARINT_SIZE) < 0) {
        goto done;
    }
    output.length = put_unsigned(output.data + output.length, count_raw) - output.data;
    for (Py_ssize_t index = 0; index < header_count; index++) {
        PyObject *header = PySequence_Tuple(PyTuple_GET_ITEM(headers, index));  /* unpacked once, as the reference */
        if (header == NULL) {
            goto done;
        }
        if (PyTuple_GET_SIZE(header) != 2) {
            PyErr_Format(PyExc_ValueError, "a header must be a (key, value) pair, not %zd items",
                         PyTuple_GET_SIZE(header));
            Py_DECREF(header);
            goto done;
        }
        PyObject *encoded_key = encode_header_key(PyTuple_GET_ITEM(header, 0));
        Field header_value = {.present = 0};
        uint64_t header_key_raw, header_value_raw;
        Py_ssize_t header_value_size;
        int failed = encoded_key == NULL || !PyBytes_Check(encoded_key)
                     || varint_raw(PyBytes_GET_SIZE(encoded_key), &header_key_raw) < 0
                     || get_field(PyTuple_GET_ITEM(header, 1), &header_value) < 0
                     || field_size(&header_value, &header_value_raw, &header_value_size) < 0
                     || output_reserve(&output, MAX_VARINT_SIZE + PyBytes_GET_SIZE(encoded_key)
                                                + header_value_size) < 0;
        if (!failed) {
            out = put_unsigned(output.data + output.length, header_key_raw);
            memcpy(out, PyBytes_AS_STRING(encoded_key), (size_t)PyBytes_GET_SIZE(encoded_key));
            out = put_field(out + PyBytes_GET_SIZE(encoded_key), &header_value, header_value_raw);
            output.length = out - output.data;
        }
        else if (encoded_key != NULL && !PyBytes_Check(encoded_key) && !PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a header key must encode to bytes");
        }
        release_field(&header_value);
        Py_XDECREF(encoded_key);
        Py_DECREF(header);
        if (failed) {
            goto done;
        }
    }
    uint64_t body_raw;
    if (varint_raw(output.length - body_start, &body_raw) < 0) {
        goto done;
    }
    int prefix_size = unsigned_size(body_raw);
    put_unsigned(output.data + body_start - prefix_size, body_raw);
    result = PyBytes_FromStringAndSize((const char *)output.data + body_start - prefix_size,
                                       output.length - body_start + prefix_size);
done:
    release_field(&key);
    release_field(&value);
    Py_XDECREF(headers);
    PyMem_Free(output.data);
    return result;
}

/* values[index] (or keys[index]) as a new reference: lists and tuples directly, other sequences by indexing. */
static inline PyObject *
item_at(PyObject *sequence, Py_ssize_t index)
{
    if (PyList_CheckExact(sequence)) {
        if (index < PyList_GET_SIZE(sequence)) {
            return Py_NewRef(PyList_GET_ITEM(sequence, index));
        }
    }
    else if (PyTuple_CheckExact(sequence)) {
        if (index < PyTuple_GET_SIZE(sequence)) {
            return Py_NewRef(PyTuple_GET_ITEM(sequence, index));
        }
    }
    else {
        return PySequence_GetItem(sequence, index);
    }
    PyErr_SetString(PyExc_IndexError, "list index out of range");
    return NULL;
}

PyDoc_STRVAR(encode_values_doc,
"encode_values(parts, values, keys, start, end, offset_delta, timestamp_delta, room, must_take_one)\n--\n\n"
"builder.encode_values_python in C: the records of values[start:end] appended to `parts` as one bytes object;\n"
"returns (records appended, bytes appended).");

static PyObject *
encode_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "encode_values() takes 9 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *parts = args[0], *values = args[1], *keys = args[2];
    if (!PyList_Check(parts)) {
        PyErr_SetString(PyExc_TypeError, "parts must be a list");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]), end = PyLong_AsSsize_t(args[4]);
    long long offset_delta = PyLong_AsLongLong(args[5]);
    long long room = PyLong_AsLongLong(args[7]);
    int must_take_one = PyObject_IsTrue(args[8]);
    uint64_t time_raw;
    if (PyErr_Occurred() || must_take_one < 0 || timestamp_raw(args[6], &time_raw) < 0) {
        return NULL;
    }
    /* What every record of the call shares: attributes 0, the timestamp delta, no headers. */
    const Py_ssize_t shared = 1 + unsigned_size(time_raw) + 1;
    Output output = {NULL, 0, 0};
    long long added = 0;
    Py_ssize_t index = start;
    PyObject *result = NULL;
    for (; index < end; index++, offset_delta++) {
        Field key = {.present = 0}, value = {.present = 0};
        PyObject *key_object = keys == Py_None ? Py_NewRef(Py_None) : item_at(keys, index);
        PyObject *value_object = key_object == NULL ? NULL : item_at(values, index);
        uint64_t offset_raw, key_raw, value_raw, body_raw;
        Py_ssize_t key_size, value_size;
        int failed = value_object == NULL || varint_raw(offset_delta, &offset_raw) < 0
                     || get_field(key_object, &key) < 0 || field_size(&key, &key_raw, &key_size) < 0
                     || get_field(value_object, &value) < 0 || field_size(&value, &value_raw, &value_size) < 0;
        Py_ssize_t body = 0;
        if (!failed) {
            body = shared + unsigned_size(offset_raw) + key_size + value_size;
            failed = varint_raw(body, &body_raw) < 0;
        }
        long long record_size = failed ? 0 : unsigned_size(body_raw) + body;
        int stop = !failed && added + record_size > room && !(must_take_one && index == start);
        if (!failed && !stop) {
            failed = output_reserve(&output, (Py_ssize_t)record_size) < 0;
            if (!failed) {
                unsigned char *out = put_unsigned(output.data + output.length, body_raw);
                *out++ = 0;
                out = put_unsigned(out, time_raw);
                out = put_unsigned(out, offset_raw);
                out = put_field(out, &key, key_raw);
                out = put_field(out, &value, value_raw);
                *out++ = 0; /* no headers */
                output.length = out - output.data;
                added += record_size;
            }
        }
        release_field(&key);
        release_field(&value);
        Py_XDECREF(key_object);
        Py_XDECREF(value_object);
        if (failed) {
            goto done;
        }
        if (stop) {
            break;
        }
    }
    if (output.length) {
        PyObject *chunk = PyBytes_FromStringAndSize((const char *)output.data, output.length);
        if (chunk == NULL || PyList_Append(parts, chunk) < 0) {
            Py_XDECREF(chunk);
            goto done;
        }
        Py_DECREF(chunk);
    }
    result = Py_BuildValue("(nL)", index - start, added);
done:
    PyMem_Free(output.data);
    return result;
}

/* --- the produce path: stamping one produced batch ------------------------------------------------------------ */
/* stamp_produced_batch for batch.stamp_produced_batch_python: the checks of RecordBatch.validated_header and of a
   leader taking a client's batch, then the base offset and leader epoch written in place. It never raises for a
   batch it refuses: it returns None and the caller's general path names the fault. The CRC32C is the crc32c
   package's (the one batch.py uses), called on a view of the buffer. */

/* The v2 batch header, as batch.py lays it out. */
#define BATCH_LENGTH_OFFSET 8
#define BATCH_EPOCH_OFFSET 12
#define BATCH_MAGIC_OFFSET 16
#define BATCH_CRC_OFFSET 17
#define BATCH_ATTRIBUTES_OFFSET 21
#define BATCH_LAST_OFFSET_DELTA_OFFSET 23
#define BATCH_MAX_TIMESTAMP_OFFSET 35
#define BATCH_PRODUCER_ID_OFFSET 43
#define BATCH_PRODUCER_EPOCH_OFFSET 51
#define BATCH_BASE_SEQUENCE_OFFSET 53
#define BATCH_RECORDS_COUNT_OFFSET 57
#define BATCH_OVERHEAD 61
#define BATCH_LOG_OVERHEAD 12
#define BATCH_CODEC_MASK 0x07
#define BATCH_MAX_CODEC 4 /* zstd */
#define BATCH_TRANSACTIONAL_FLAG 0x10
#define BATCH_CONTROL_FLAG 0x20

static PyObject *crc32c_function; /* crc32c.crc32c, looked up once at import */

static uint64_t
read_be(const unsigned char *p, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++) {
        value = (value << 8) | p[i];
    }
    return value;
}

static void
write_be(unsigned char *p, uint64_t value, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
}

PyDoc_STRVAR(stamp_produced_batch_doc,
"stamp_produced_batch(buffer, base_offset, epoch) -> (attributes, last_offset_delta, max_timestamp, producer_id,\n"
"records_count) | None\n\nbatch.stamp_produced_batch_python in C.");

static PyObject *
stamp_produced_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "stamp_produced_batch takes buffer, base_offset and epoch");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[1]);
    if (base_offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long epoch = PyLong_AsLong(args[2]);
    if (epoch == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (epoch < INT32_MIN || epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "epoch does not fit an int32");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    unsigned char *p = (unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    if (size < BATCH_OVERHEAD
        || (int64_t)(int32_t)read_be(p + BATCH_LENGTH_OFFSET, 4) + BATCH_LOG_OVERHEAD != (int64_t)size
        || p[BATCH_MAGIC_OFFSET] != 2) {
        goto refuse;
    }
    int attributes = (int16_t)read_be(p + BATCH_ATTRIBUTES_OFFSET, 2);
    int32_t last_offset_delta = (int32_t)read_be(p + BATCH_LAST_OFFSET_DELTA_OFFSET, 4);
    int64_t max_timestamp = (int64_t)read_be(p + BATCH_MAX_TIMESTAMP_OFFSET, 8);
    int64_t producer_id = (int64_t)read_be(p + BATCH_PRODUCER_ID_OFFSET, 8);
    int producer_epoch = (int16_t)read_be(p + BATCH_PRODUCER_EPOCH_OFFSET, 2);
    int32_t base_sequence = (int32_t)read_be(p + BATCH_BASE_SEQUENCE_OFFSET, 4);
    int32_t records_count = (int32_t)read_be(p + BATCH_RECORDS_COUNT_OFFSET, 4);
    int codec = attributes & BATCH_CODEC_MASK;
    if (codec > BATCH_MAX_CODEC || (attributes & BATCH_CONTROL_FLAG)
        || records_count <= 0 || last_offset_delta < 0 || (int64_t)last_offset_delta + 1 != records_count
        || (codec == 0 && (int64_t)records_count * MIN_RECORD_SIZE > size - BATCH_OVERHEAD)
        || producer_id < -1 || producer_epoch < -1 || base_sequence < -1
        || ((attributes & BATCH_TRANSACTIONAL_FLAG) && producer_id == -1)
        || (producer_id > -1 && base_sequence < 0)) {
        goto refuse;
    }
    PyObject *covered = PyMemoryView_FromMemory((char *)p + BATCH_ATTRIBUTES_OFFSET, size - BATCH_ATTRIBUTES_OFFSET,
                                                PyBUF_READ);
    if (covered == NULL) {
        goto done;
    }
    PyObject *crc = PyObject_CallOneArg(crc32c_function, covered);
    Py_DECREF(covered);
    if (crc == NULL) {
        goto done;
    }
    unsigned long computed = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (computed == (unsigned long)-1 && PyErr_Occurred()) {
        goto done;
    }
    if (computed != (unsigned long)read_be(p + BATCH_CRC_OFFSET, 4)) {
        goto refuse;
    }
    if (view.readonly) {  /* as struct's pack_into refuses a read-only buffer */
        PyErr_SetString(PyExc_TypeError, "argument must be read-write bytes-like object");
        goto done;
    }
    write_be(p, (uint64_t)base_offset, 8);
    write_be(p + BATCH_EPOCH_OFFSET, (uint64_t)(uint32_t)(int32_t)epoch, 4);
    result = Py_BuildValue("(iiLLi)", attributes, last_offset_delta, (long long)max_timestamp, (long long)producer_id,
                           records_count);
    goto done;
refuse:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

/* --- the module ------------------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_VARARGS | METH_KEYWORDS, decode_records_doc},
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL, encode_record_doc},
    {"encode_values", (PyCFunction)(void (*)(void))encode_values, METH_FASTCALL, encode_values_doc},
    /* the produce path */
    {"stamp_produced_batch", (PyCFunction)(void (*)(void))stamp_produced_batch, METH_FASTCALL,
     stamp_produced_batch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kfk.records._accel",
    .m_doc = "The record v2 codec's per-record loops in C; kfk.records.accelerator decides whether they are used.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__accel(void)
{
    PyObject *errors = PyImport_ImportModule("kfk.errors");
    if (errors == NULL) {
        return NULL;
    }
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL) {
        return NULL;
    }
    PyObject *record = PyImport_ImportModule("kfk.records.record");
    if (record == NULL) {
        return NULL;
    }
    RecordType = PyObject_GetAttrString(record, "Record");
    Py_DECREF(record);
    if (RecordType == NULL) {
        return NULL;
    }
    PyObject *crc32c_module = PyImport_ImportModule("crc32c");
    if (crc32c_module == NULL) {
        return NULL;
    }
    crc32c_function = PyObject_GetAttrString(crc32c_module, "crc32c");
    Py_DECREF(crc32c_module);
    if (crc32c_function == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_definition);
}
