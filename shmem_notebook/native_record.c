/* The race recording's hot path in C (see native_record.py): what a recorded cell pays on every
 * shmem4py call, every slice it takes and every name it reads. Each function does the common case
 * and hands every other case to the Python function it stands for, which stays the reference. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* set by setup(): layer.depth, state.cell_files, layer.line_of as line_finder (a list of one function, which
 * the race runner replaces) and the layer's own cell_line, the Python hooks the C ones hand other cases to */
static PyObject *depth, *cell_files, *line_finder, *own_cell_line, *get_rest, *read_py, *set_py,
    *element_range_py;
/* the recording the hooks feed (feed()), or NULL; its access when that is an Access, else NULL */
static PyObject *fed, *fed_access;
static PyObject *s_starts, *s_slices,
    *s_cache, *s_view, *s_rma, *s_priv, *s_zero, *s_mem,
    *s_access, *s_load, *s_read, *s_store, *s_write, *s_sync, *s_heap, *s_peers, *s_sym;

static int ready(void) {
    if (depth == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "native_record.setup() was not called");
        return 0;
    }
    return 1;
}

/* depth[0] += d (the layer's "inside a recorded call", read by the hooks) */
static int depth_add(long d) {
    long now = PyLong_AsLong(PyList_GET_ITEM(depth, 0));
    if (now == -1 && PyErr_Occurred()) return -1;
    PyObject *v = PyLong_FromLong(now + d);
    if (v == NULL) return -1;
    return PyList_SetItem(depth, 0, v);
}

static int inside(void) {
    return PyList_GET_ITEM(depth, 0) != s_zero && PyObject_IsTrue(PyList_GET_ITEM(depth, 0));
}

/* ---------------------------------------------------------------------------------------------
 * Recorded: layer._wrapper's wrapper for a function of the shmem module (no binding) */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict, *op, *func, *slot, *params, *fallback;
} Recorded;

/* The line of an instruction, remembered: finding it walks the code's line table from its start
 * (as frame.f_lineno does), which a loop of short iterations would pay at every call. Direct-mapped
 * by (code, instruction); an entry holds its code object, so its address is not reused meanwhile. */
#define LINES 1024
static struct {
    PyCodeObject *code;
    int lasti, line;
} lines[LINES];

static int line_of(PyFrameObject *frame) {
    PyCodeObject *code = PyFrame_GetCode(frame);
    int lasti = PyFrame_GetLasti(frame);
    size_t slot = (((size_t)code >> 4) * 31 + (size_t)lasti) % LINES;
    if (lines[slot].code != code || lines[slot].lasti != lasti) {
        Py_XSETREF(lines[slot].code, (PyCodeObject *)Py_NewRef(code));
        lines[slot].lasti = lasti;
        lines[slot].line = PyFrame_GetLineNumber(frame);
    }
    Py_DECREF(code);
    return lines[slot].line;
}

/* the line of the recorded cell the caller runs, as layer.wrapper finds it; NULL on error */
static PyObject *caller_line(void) {
    PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the caller's (C functions have none) */
    if (frame == NULL) return PyLong_FromLong(0);
    PyObject *cell_line = PyList_GET_ITEM(line_finder, 0); /* borrowed: setup() checked its length */
    if (cell_line == own_cell_line) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        int found = PySet_Contains(cell_files, code->co_filename);
        Py_DECREF(code);
        if (found < 0) return NULL;
        if (found) return PyLong_FromLong(line_of(frame));
    }
    return PyObject_CallOneArg(cell_line, (PyObject *)frame);
}

static PyObject *call_each(PyObject *functions, PyObject *const *args, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(functions); i++) {
        PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(functions, i), args, n, NULL);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    return Py_None;
}

static PyObject *recorded_vectorcall(Recorded *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *befores = PyList_GET_ITEM(self->slot, 0), *afters = PyList_GET_ITEM(self->slot, 1);
    PyObject *fast = PyList_GET_ITEM(self->slot, 2);
    if (inside() || !PyTuple_Check(afters) || PyTuple_GET_SIZE(afters) == 0)
        return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || !PyTuple_Check(befores))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    PyObject *line = caller_line();
    if (line == NULL) return NULL;
    /* held while the call runs, as the Python wrapper's locals are: a consumer attached meanwhile
     * replaces the slot's items */
    Py_INCREF(befores);
    Py_INCREF(afters);
    Py_INCREF(fast);
    PyObject *result = NULL, *bound = NULL, *all = NULL;
    if (fast != Py_None) {
        if (depth_add(1) < 0) goto done;
        result = PyObject_Vectorcall(self->func, args, nargs, NULL);
        if (depth_add(-1) < 0) Py_CLEAR(result);
        if (result == NULL) goto done;
        all = PyTuple_New(nargs);
        if (all == NULL) goto fail;
        for (Py_ssize_t i = 0; i < nargs; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(all, i, args[i]);
        }
        PyObject *fargs[3] = {all, result, line};
        PyObject *r = PyObject_Vectorcall(fast, fargs, 3, NULL);
        if (r == NULL) goto fail;
        Py_DECREF(r);
        goto done;
    }
    bound = PyDict_New();
    if (bound == NULL) goto done;
    Py_ssize_t nparams = PyTuple_GET_SIZE(self->params);
    for (Py_ssize_t i = 0; i < nargs && i < nparams; i++)
        if (PyDict_SetItem(bound, PyTuple_GET_ITEM(self->params, i), args[i]) < 0) goto done;
    PyObject *bargs[3] = {self->op, bound, line};
    if (call_each(befores, bargs, 3) == NULL) goto done;
    if (depth_add(1) < 0) goto done;
    result = PyObject_Vectorcall(self->func, args, nargs, NULL);
    if (depth_add(-1) < 0) Py_CLEAR(result);
    if (result == NULL) goto done;
    PyObject *aargs[4] = {self->op, bound, result, line};
    if (call_each(afters, aargs, 4) == NULL) goto fail;
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(all);
    Py_XDECREF(bound);
    Py_DECREF(line);
    Py_DECREF(befores);
    Py_DECREF(afters);
    Py_DECREF(fast);
    return result;
}

static int recorded_init(Recorded *self, PyObject *args, PyObject *kwds) {
    PyObject *op, *func, *slot, *params, *fallback;
    if (!PyArg_ParseTuple(args, "OOO!O!O:Recorded", &op, &func, &PyList_Type, &slot, &PyTuple_Type, &params, &fallback))
        return -1;
    if (PyList_GET_SIZE(slot) != 3) {
        PyErr_SetString(PyExc_ValueError, "slot must be [befores, afters, fast]");
        return -1;
    }
    if (!ready()) return -1;
    Py_XSETREF(self->op, Py_NewRef(op));
    Py_XSETREF(self->func, Py_NewRef(func));
    Py_XSETREF(self->slot, Py_NewRef(slot));
    Py_XSETREF(self->params, Py_NewRef(params));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    self->vectorcall = (vectorcallfunc)recorded_vectorcall;
    return 0;
}

static int recorded_traverse(Recorded *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    Py_VISIT(self->op);
    Py_VISIT(self->func);
    Py_VISIT(self->slot);
    Py_VISIT(self->params);
    Py_VISIT(self->fallback);
    return 0;
}

static int recorded_clear(Recorded *self) {
    Py_CLEAR(self->dict);
    Py_CLEAR(self->op);
    Py_CLEAR(self->func);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->params);
    Py_CLEAR(self->fallback);
    return 0;
}

static void recorded_dealloc(Recorded *self) {
    PyObject_GC_UnTrack(self);
    recorded_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef recorded_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject RecordedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shmem_notebook_record.Recorded",
    .tp_doc = "Recorded(op, func, slot, params, fallback): a shmem function's calls, recorded (see layer).",
    .tp_basicsize = sizeof(Recorded),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)recorded_init,
    .tp_dealloc = (destructor)recorded_dealloc,
    .tp_traverse = (traverseproc)recorded_traverse,
    .tp_clear = (inquiry)recorded_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Recorded, vectorcall),
    .tp_dictoffset = offsetof(Recorded, dict),
    .tp_getset = recorded_getset,
};

static int numpy_owned(PyObject *a) {
    PyObject *base = PyArray_BASE((PyArrayObject *)a);
    return base == NULL || (PyArray_Check(base) && PyArray_BASE((PyArrayObject *)base) == NULL);
}

/* Where a recording's heaps are mapped (its AddressBook's heap and peers, fixed when it starts) */
#define RECENT 64
typedef struct {
    long long addr, nbytes, stride, dim;
    PyObject *descr, *info; /* NULL: empty */
} Known;
typedef struct {
    long long lo, hi;
    PyObject *peers; /* [(lo, hi, pe)]; NULL: not read, every info is Python's */
    /* fast_info's last answers, by what they are made of (address, size, dtype, 1-D stride and
     * length): a slice taken anew at each iteration of a loop is the same memory as the last one */
    Known recent[RECENT];
} Layout;

static int layout_traverse(Layout *layout, visitproc visit, void *arg) {
    Py_VISIT(layout->peers);
    for (int i = 0; i < RECENT; i++) {
        Py_VISIT(layout->recent[i].descr);
        Py_VISIT(layout->recent[i].info);
    }
    return 0;
}

static void layout_clear(Layout *layout) {
    Py_CLEAR(layout->peers);
    for (int i = 0; i < RECENT; i++) {
        Py_CLEAR(layout->recent[i].descr);
        Py_CLEAR(layout->recent[i].info);
    }
}

static int layout_read(Layout *layout, PyObject *memory) {
    PyObject *heap = PyObject_GetAttr(memory, s_heap), *peers = PyObject_GetAttr(memory, s_peers);
    int ok = heap && peers && PyTuple_Check(heap) && PyTuple_GET_SIZE(heap) == 2 && PyList_Check(peers);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(peers); i++) {
        PyObject *p = PyList_GET_ITEM(peers, i);
        ok = PyTuple_Check(p) && PyTuple_GET_SIZE(p) == 3;
    }
    if (ok) {
        layout->lo = PyLong_AsLongLong(PyTuple_GET_ITEM(heap, 0));
        layout->hi = PyLong_AsLongLong(PyTuple_GET_ITEM(heap, 1));
        ok = !PyErr_Occurred();
    }
    if (ok) Py_XSETREF(layout->peers, Py_NewRef(peers));
    else if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "AddressBook.heap/peers are not (lo, hi) and a list");
    Py_XDECREF(heap);
    Py_XDECREF(peers);
    return ok ? 0 : -1;
}

/* dtype.str of a descr, remembered by the descr (which the entry holds); borrowed */
static PyObject *dtype_strs;
static PyObject *dtype_str(PyArray_Descr *descr) {
    PyObject *key = PyLong_FromVoidPtr(descr);
    if (key == NULL) return NULL;
    PyObject *known = PyDict_GetItemWithError(dtype_strs, key);
    if (known == NULL && !PyErr_Occurred()) {
        PyObject *str = PyObject_GetAttrString((PyObject *)descr, "str");
        PyObject *entry = str ? PyTuple_Pack(2, (PyObject *)descr, str) : NULL;
        if (entry != NULL && PyDict_SetItem(dtype_strs, key, entry) == 0) known = entry;
        Py_XDECREF(entry); /* the dict holds it */
        Py_XDECREF(str);
    }
    Py_DECREF(key);
    return known == NULL ? NULL : PyTuple_GET_ITEM(known, 1);
}

/* AddressBook.info(x) of a C-contiguous, non-empty ndarray (the caller checks it, and that the
 * layout was read), found here as memory.py finds it: its address, size and dtype are at hand.
 * NULL on error */
static PyObject *fast_info(Layout *layout, PyArrayObject *x) {
    long long addr = (long long)(intptr_t)PyArray_DATA(x), base = 0;
    long long lo = addr, hi = addr + (long long)PyArray_NBYTES(x);
    PyObject *space = s_priv;
    if (layout->lo <= lo && lo < layout->hi) {
        space = s_sym, base = layout->lo;
    } else {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(layout->peers); i++) {
            PyObject *p = PyList_GET_ITEM(layout->peers, i);
            long long plo = PyLong_AsLongLong(PyTuple_GET_ITEM(p, 0)), phi = PyLong_AsLongLong(PyTuple_GET_ITEM(p, 1));
            if (PyErr_Occurred()) return NULL;
            if (plo <= lo && lo < phi) {
                space = PyTuple_GET_ITEM(p, 2), base = plo;
                break;
            }
        }
    }
    PyObject *dtype = dtype_str(PyArray_DESCR(x));
    if (dtype == NULL) return NULL;
    int one = PyArray_NDIM(x) == 1;
    PyObject *items[10] = {PyWeakref_NewRef((PyObject *)x, NULL),
                           Py_NewRef(space),
                           PyLong_FromLongLong(addr - base),
                           PyLong_FromLongLong(lo - base),
                           PyLong_FromLongLong(hi - base),
                           PyLong_FromSsize_t(PyArray_ITEMSIZE(x)),
                           Py_NewRef(dtype),
                           PyLong_FromSsize_t(one ? PyArray_STRIDE(x, 0) : 0),
                           PyLong_FromSsize_t(one ? PyArray_DIM(x, 0) : 0),
                           Py_NewRef(Py_None)};
    PyObject *found = PyTuple_New(10);
    for (int i = 0; i < 10; i++) {
        if (items[i] == NULL) Py_CLEAR(found);
        if (found != NULL) PyTuple_SET_ITEM(found, i, items[i]);
        else Py_XDECREF(items[i]);
    }
    return found;
}

/* AddressBook.info(a) (new reference): found here for plain arrays (the last few kept by what
 * they are made of, so that the same memory seen again is a lookup; a slice taken anew is not
 * worth a dict entry), else through the recording's cache, else Python's. An answer kept so
 * holds a weak reference to the first array it was made for: no caller reads it. */
static PyObject *cached_info(Layout *layout, PyObject *cache, PyObject *info, PyObject *a) {
    if (layout->peers != NULL && PyArray_Check(a) && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a) &&
        PyArray_SIZE((PyArrayObject *)a) > 0) {
        PyArrayObject *x = (PyArrayObject *)a;
        int one = PyArray_NDIM(x) == 1;
        long long addr = (long long)(intptr_t)PyArray_DATA(x), nbytes = (long long)PyArray_NBYTES(x);
        long long stride = one ? (long long)PyArray_STRIDE(x, 0) : 0, dim = one ? (long long)PyArray_DIM(x, 0) : 0;
        PyObject *descr = (PyObject *)PyArray_DESCR(x);
        Known *k = &layout->recent[(((unsigned long long)addr >> 3) * 31 + (unsigned long long)nbytes) % RECENT];
        if (k->info != NULL && k->addr == addr && k->nbytes == nbytes && k->descr == descr && k->stride == stride &&
            k->dim == dim)
            return Py_NewRef(k->info);
        PyObject *made = fast_info(layout, x);
        if (made == NULL) return NULL;
        k->addr = addr, k->nbytes = nbytes, k->stride = stride, k->dim = dim;
        Py_XSETREF(k->descr, Py_NewRef(descr));
        Py_XSETREF(k->info, Py_NewRef(made));
        return made;
    }
    PyObject *found, *key = PyLong_FromVoidPtr(a);
    if (key == NULL) return NULL;
    found = PyDict_GetItemWithError(cache, key);
    Py_DECREF(key);
    if (found != NULL && PyTuple_Check(found) && PyTuple_GET_SIZE(found) == 10 &&
        PyWeakref_GetObject(PyTuple_GET_ITEM(found, 0)) == a)
        return Py_NewRef(found);
    if (PyErr_Occurred()) return NULL;
    return PyObject_CallOneArg(info, a);
}

/* ---------------------------------------------------------------------------------------------
 * PlainRMA: RaceRecording._plain_rma for put/get/put_nbi/get_nbi called with three arguments */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *rec, *counts, *name, *me, *fallback, *info, *cache, *merge, *events, *private_add, *extend;
    long long *n; /* counts' items */
    Layout layout;
    int writes, nbi;
    Py_ssize_t lo, hi, fp, llo, lhi, lfp, values;
} PlainRMA;

static int as_ll(PyObject *t, Py_ssize_t i, long long *out) {
    *out = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* (lo, hi, fp) of the first count elements of a, as _plain_rma finds them from a's info */
static int span(PyObject *a, PyObject *info, Py_ssize_t count, PyObject **lo, PyObject **hi, PyObject **fp) {
    long long addr, itemsize, stride;
    if (as_ll(info, 2, &addr) < 0 || as_ll(info, 5, &itemsize) < 0 || as_ll(info, 7, &stride) < 0) return -1;
    if (stride == itemsize || PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a)) {
        *lo = PyLong_FromLongLong(addr);
        *hi = PyLong_FromLongLong(addr + (long long)count * itemsize);
        *fp = Py_NewRef(Py_None);
    } else {
        *lo = Py_NewRef(PyTuple_GET_ITEM(info, 3));
        *hi = Py_NewRef(PyTuple_GET_ITEM(info, 4));
        *fp = Py_NewRef(PyTuple_GET_ITEM(info, 9));
    }
    return (*lo && *hi) ? 0 : -1;
}

/* The recording's counts (ops, n_local, n_async, truncated, cap) live in one array of int64 of its own,
 * ``RaceRecording.counts`` (its attributes of those names are properties over it): the functions count in
 * place, through a pointer to the array's items taken when they are given the recording, with no look-up
 * and no int made per count. The recording never resizes the array, so the pointer stays good while the
 * function holds the array (``counts``). */
enum { C_OPS, C_LOCAL, C_ASYNC, C_TRUNCATED, C_CAP, N_COUNTS };
#define NOT_TRUNCATED LLONG_MIN /* truncated is None */

/* the recording's counts array (new reference), its items at *n; NULL with an error if it has none */
static PyObject *counts_of(PyObject *rec, long long **n) {
    PyObject *counts = PyObject_GetAttrString(rec, "counts");
    if (counts == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(counts, &view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        Py_DECREF(counts);
        return NULL;
    }
    int ok = view.itemsize == sizeof(long long) && view.len == N_COUNTS * (Py_ssize_t)sizeof(long long) &&
             view.format != NULL && strcmp(view.format, "q") == 0;
    *n = (long long *)view.buf;
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "not a RaceRecording: its counts are not int64[5]");
        Py_DECREF(counts);
        return NULL;
    }
    return counts;
}

/* is the recording full (len(events) >= cap)? */
static int full(const long long *n, PyObject *events) { return PyList_GET_SIZE(events) >= n[C_CAP]; }

/* the recording stops at line: truncated = line (0, or -1 on error) */
static int truncate_at(long long *n, PyObject *line) {
    long long at = PyLong_AsLongLong(line);
    if (at == -1 && PyErr_Occurred()) return -1;
    n[C_TRUNCATED] = at;
    return 0;
}

/* a new event (or its values): a list of numbers, strings, None and such lists, in no reference cycle,
 * so the collector is told not to look at it (a traced loop keeps thousands, each looked at by every
 * collection while the cell runs) */
static PyObject *event_list(Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    if (list != NULL) PyObject_GC_UnTrack(list);
    return list;
}

/* a <= b for two Python ints (-1 on error) */
static int le(PyObject *a, PyObject *b) { return PyObject_RichCompareBool(a, b, Py_LE); }

/* the first case of RaceRecording._extend, inline: the ranges touch on both sides */
static int merge_touching(PlainRMA *self, PyObject *last, PyObject *lo, PyObject *hi, PyObject *llo, PyObject *lhi,
                          PyObject *values) {
    Py_ssize_t at[4] = {self->lo, self->hi, self->llo, self->lhi};
    PyObject *mine[4] = {lo, hi, llo, lhi};
    for (int k = 0; k < 4; k++) {
        PyObject *theirs = PyList_GET_ITEM(last, at[k]);
        int take = PyObject_RichCompareBool(mine[k], theirs, k % 2 ? Py_GT : Py_LT);
        if (take < 0) return -1;
        if (take && PyList_SetItem(last, at[k], Py_NewRef(mine[k])) < 0) return -1;
    }
    /* _merge_values: plain puts and gets add up nothing; their values are kept, up to 16 */
    PyObject *kept = PyList_GET_ITEM(last, self->values);
    if (values == Py_None) return PyList_SetItem(last, self->values, Py_NewRef(Py_None));
    if (kept != Py_None && PyList_Check(kept) && PyList_GET_SIZE(kept) < 16) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
            PyObject *v = PyList_GET_ITEM(values, i);
            int in = PySequence_Contains(kept, v);
            if (in < 0 || (!in && PyList_Append(kept, v) < 0)) return -1;
        }
    }
    return 0;
}

static PyObject *plain(PlainRMA *self, PyObject *target, PyObject *source, PyObject *pe, PyObject *line) {
    PyObject *remote = self->writes ? target : source, *local = self->writes ? source : target;
    Py_ssize_t ts = PyArray_SIZE((PyArrayObject *)target), ss = PyArray_SIZE((PyArrayObject *)source);
    Py_ssize_t count = ts < ss ? ts : ss;
    PyObject *ri = NULL, *li = NULL, *lo = NULL, *hi = NULL, *fp = NULL, *llo = NULL, *lhi = NULL, *lfp = NULL;
    PyObject *values = NULL, *key = NULL, *event = NULL, *out = NULL;
    if ((ri = cached_info(&self->layout, self->cache, self->info, remote)) == NULL ||
        (li = cached_info(&self->layout, self->cache, self->info, local)) == NULL)
        goto done;
    if (!PyTuple_Check(ri) || PyTuple_GET_SIZE(ri) != 10 || !PyTuple_Check(li) || PyTuple_GET_SIZE(li) != 10) {
        PyErr_SetString(PyExc_TypeError, "AddressBook.info gave no 10-tuple");
        goto done;
    }
    PyObject *dtype = PyTuple_GET_ITEM(ri, 6), *lspace = PyTuple_GET_ITEM(li, 1);
    if (span(remote, ri, count, &lo, &hi, &fp) < 0 || span(local, li, count, &llo, &lhi, &lfp) < 0) goto done;
    if (count == 1 && self->writes && ss == 1) {
        PyObject *v = PyArray_GETITEM((PyArrayObject *)source, PyArray_DATA((PyArrayObject *)source));
        if (v == NULL) goto done;
        values = event_list(1);
        if (values == NULL) {
            Py_DECREF(v);
            goto done;
        }
        PyList_SET_ITEM(values, 0, v);
    } else {
        values = Py_NewRef(Py_None);
    }
    int local_too = self->nbi;
    if (!local_too) {
        local_too = PyObject_RichCompareBool(pe, self->me, Py_EQ);
        if (local_too < 0) goto done;
    }
    if (self->nbi && PyUnicode_Check(lspace) && PyUnicode_Compare(lspace, s_priv) == 0) {
        PyObject *r = PyObject_CallFunctionObjArgs(self->private_add, llo, lhi, NULL);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    if (local_too) {
        self->n[C_ASYNC]++;
        PyObject *n_local = PyLong_FromLongLong(self->n[C_LOCAL]);
        if (n_local == NULL) goto done;
        key = PyTuple_Pack(8, s_rma, self->name, line, pe, dtype, lspace, s_zero, n_local);
        Py_DECREF(n_local);
    } else {
        key = PyTuple_Pack(7, s_rma, self->name, line, pe, dtype, lspace, s_zero);
    }
    if (key == NULL) goto done;
    self->n[C_OPS]++;
    if (self->n[C_TRUNCATED] != NOT_TRUNCATED) {
        out = Py_None;
        goto done;
    }
    PyObject *last = PyDict_GetItemWithError(self->merge, key);
    if (last == NULL && PyErr_Occurred()) goto done;
    if (last != NULL) {
        Py_INCREF(last);
        int touching = fp == Py_None && lfp == Py_None && PyList_Check(last) &&
                       PyList_GET_ITEM(last, self->fp) == Py_None && PyList_GET_ITEM(last, self->lfp) == Py_None;
        if (touching) {
            int a = le(lo, PyList_GET_ITEM(last, self->hi)), b = le(PyList_GET_ITEM(last, self->lo), hi);
            int c = le(llo, PyList_GET_ITEM(last, self->lhi)), d = le(PyList_GET_ITEM(last, self->llo), lhi);
            if (a < 0 || b < 0 || c < 0 || d < 0) {
                Py_DECREF(last);
                goto done;
            }
            touching = a && b && c && d;
        }
        if (touching) {
            int r = merge_touching(self, last, lo, hi, llo, lhi, values);
            Py_DECREF(last);
            if (r == 0) out = Py_None;
            goto done;
        }
    }
    event = event_list(14);
    if (event == NULL) {
        Py_XDECREF(last);
        goto done;
    }
    PyObject *items[14] = {s_rma, self->name, line, pe, lo, hi, dtype, lspace, llo, lhi, s_zero, values, fp, lfp};
    for (int i = 0; i < 14; i++) PyList_SET_ITEM(event, i, Py_NewRef(items[i]));
    if (last != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(self->extend, last, event, NULL);
        Py_DECREF(last);
        if (r == NULL) goto done;
        int merged = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (merged < 0) goto done;
        if (merged) {
            out = Py_None;
            goto done;
        }
    }
    if (full(self->n, self->events)) {
        if (truncate_at(self->n, line) == 0) out = Py_None;
        goto done;
    }
    if (PyList_Append(self->events, event) == 0 && PyDict_SetItem(self->merge, key, event) == 0) out = Py_None;
done:
    Py_XDECREF(ri);
    Py_XDECREF(li);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(fp);
    Py_XDECREF(llo);
    Py_XDECREF(lhi);
    Py_XDECREF(lfp);
    Py_XDECREF(values);
    Py_XDECREF(key);
    Py_XDECREF(event);
    return out ? Py_NewRef(out) : NULL;
}

/* handler(args, result, line), as accesses.fast_for's fast_rma */
static PyObject *plain_vectorcall(PlainRMA *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 3 && kwnames == NULL && PyTuple_Check(args[0]) && PyTuple_GET_SIZE(args[0]) == 3) {
        PyObject *call = args[0];
        PyObject *t = PyTuple_GET_ITEM(call, 0), *s = PyTuple_GET_ITEM(call, 1);
        if (PyArray_Check(t) && PyArray_Check(s)) return plain(self, t, s, PyTuple_GET_ITEM(call, 2), args[2]);
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int plain_init(PlainRMA *self, PyObject *args, PyObject *kwds) {
    PyObject *rec, *op, *fallback, *fields, *memory = NULL, *private = NULL;
    if (!PyArg_ParseTuple(args, "OOOO!:PlainRMA", &rec, &op, &fallback, &PyDict_Type, &fields)) return -1;
    if (!ready()) return -1;
    const char *names[7] = {"lo", "hi", "fp", "llo", "lhi", "lfp", "values"};
    Py_ssize_t *at[7] = {&self->lo, &self->hi, &self->fp, &self->llo, &self->lhi, &self->lfp, &self->values};
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyDict_GetItemString(fields, names[i]);
        if (v == NULL || (*at[i] = PyLong_AsSsize_t(v)) < 0 || *at[i] >= 14) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "field %s of an rma event is not known", names[i]);
            return -1;
        }
    }
    PyObject *name = PyObject_GetAttrString(op, "name"), *writes = PyObject_GetAttrString(op, "writes");
    PyObject *nbi = PyObject_GetAttrString(op, "nbi");
    int ok = name && writes && nbi && (memory = PyObject_GetAttrString(rec, "memory")) &&
             (private = PyObject_GetAttrString(rec, "private"));
    if (ok) {
        self->writes = PyObject_IsTrue(writes);
        self->nbi = PyObject_IsTrue(nbi);
        Py_XSETREF(self->rec, Py_NewRef(rec));
        Py_XSETREF(self->counts, counts_of(rec, &self->n));
        Py_XSETREF(self->name, Py_NewRef(name));
        Py_XSETREF(self->fallback, Py_NewRef(fallback));
        Py_XSETREF(self->me, PyObject_GetAttrString(rec, "me"));
        Py_XSETREF(self->info, PyObject_GetAttrString(memory, "info"));
        Py_XSETREF(self->cache, PyObject_GetAttr(memory, s_cache));
        Py_XSETREF(self->merge, PyObject_GetAttrString(rec, "merge"));
        Py_XSETREF(self->events, PyObject_GetAttrString(rec, "events"));
        Py_XSETREF(self->private_add, PyObject_GetAttrString(private, "add"));
        Py_XSETREF(self->extend, PyObject_GetAttrString(rec, "_extend"));
        ok = self->counts && layout_read(&self->layout, memory) == 0 && self->writes >= 0 && self->nbi >= 0 && self->me &&
             self->info &&
             self->cache && PyDict_Check(self->cache) &&
             self->merge && PyDict_Check(self->merge) && self->events && PyList_Check(self->events) &&
             self->private_add && self->extend;
        if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "not a RaceRecording");
    }
    Py_XDECREF(name);
    Py_XDECREF(writes);
    Py_XDECREF(nbi);
    Py_XDECREF(memory);
    Py_XDECREF(private);
    self->vectorcall = (vectorcallfunc)plain_vectorcall;
    return ok ? 0 : -1;
}

static int plain_traverse(PlainRMA *self, visitproc visit, void *arg) {
    Py_VISIT(self->rec);
    Py_VISIT(self->counts);
    Py_VISIT(self->name);
    Py_VISIT(self->me);
    Py_VISIT(self->fallback);
    Py_VISIT(self->info);
    Py_VISIT(self->cache);
    Py_VISIT(self->merge);
    Py_VISIT(self->events);
    Py_VISIT(self->private_add);
    Py_VISIT(self->extend);
    int visited = layout_traverse(&self->layout, visit, arg);
    if (visited) return visited;
    return 0;
}

static int plain_clear(PlainRMA *self) {
    Py_CLEAR(self->rec);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->name);
    Py_CLEAR(self->me);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->info);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->merge);
    Py_CLEAR(self->events);
    Py_CLEAR(self->private_add);
    Py_CLEAR(self->extend);
    layout_clear(&self->layout);
    return 0;
}

static void plain_dealloc(PlainRMA *self) {
    PyObject_GC_UnTrack(self);
    plain_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject PlainRMAType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shmem_notebook_record.PlainRMA",
    .tp_doc = "PlainRMA(recording, op, fallback, fields): RaceRecording's handler of plain puts and gets.",
    .tp_basicsize = sizeof(PlainRMA),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plain_init,
    .tp_dealloc = (destructor)plain_dealloc,
    .tp_traverse = (traverseproc)plain_traverse,
    .tp_clear = (inquiry)plain_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(PlainRMA, vectorcall),
};

/* ---------------------------------------------------------------------------------------------
 * WorldSync: RaceRecording._world_sync's handler of barrier_all, sync_all, quiet and fence called
 * with no argument (an event that ends every merge) */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *rec, *counts, *recorded, *fallback, *merge, *events;
    long long *n; /* counts' items */
} WorldSync;

/* a world synchronisation at line: an event that ends every merge */
static PyObject *world_sync(WorldSync *self, PyObject *line) {
    PyDict_Clear(self->merge);
    self->n[C_OPS]++;
    if (self->n[C_TRUNCATED] != NOT_TRUNCATED) Py_RETURN_NONE;
    if (full(self->n, self->events)) return truncate_at(self->n, line) < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *event = event_list(5);
    if (event == NULL) return NULL;
    PyObject *items[5] = {s_sync, self->recorded, line, s_zero, Py_None};
    for (int i = 0; i < 5; i++) PyList_SET_ITEM(event, i, Py_NewRef(items[i]));
    int r = PyList_Append(self->events, event);
    Py_DECREF(event);
    return r < 0 ? NULL : Py_NewRef(Py_None);
}

/* as an after handler (op, args, result, line), or as the call's fast handler (args, result, line) */
static PyObject *world_sync_vectorcall(WorldSync *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n == 3 && kwnames == NULL && PyTuple_Check(args[0]) && PyTuple_GET_SIZE(args[0]) == 0)
        return world_sync(self, args[2]);
    if (n != 4 || kwnames != NULL || !PyDict_Check(args[1]) || PyDict_GET_SIZE(args[1]))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    return world_sync(self, args[3]);
}

static int world_sync_init(WorldSync *self, PyObject *args, PyObject *kwds) {
    PyObject *rec, *recorded, *fallback;
    if (!PyArg_ParseTuple(args, "OUO:WorldSync", &rec, &recorded, &fallback)) return -1;
    if (!ready()) return -1;
    Py_XSETREF(self->rec, Py_NewRef(rec));
    Py_XSETREF(self->counts, counts_of(rec, &self->n));
    if (self->counts == NULL) return -1;
    Py_XSETREF(self->recorded, Py_NewRef(recorded));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    Py_XSETREF(self->merge, PyObject_GetAttrString(rec, "merge"));
    Py_XSETREF(self->events, PyObject_GetAttrString(rec, "events"));
    self->vectorcall = (vectorcallfunc)world_sync_vectorcall;
    if (self->merge && PyDict_Check(self->merge) && self->events && PyList_Check(self->events)) return 0;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "not a RaceRecording");
    return -1;
}

static int world_sync_traverse(WorldSync *self, visitproc visit, void *arg) {
    Py_VISIT(self->rec);
    Py_VISIT(self->counts);
    Py_VISIT(self->recorded);
    Py_VISIT(self->fallback);
    Py_VISIT(self->merge);
    Py_VISIT(self->events);
    return 0;
}

static int world_sync_clear(WorldSync *self) {
    Py_CLEAR(self->rec);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->recorded);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->merge);
    Py_CLEAR(self->events);
    return 0;
}

static void world_sync_dealloc(WorldSync *self) {
    PyObject_GC_UnTrack(self);
    world_sync_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject WorldSyncType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shmem_notebook_record.WorldSync",
    .tp_doc = "WorldSync(recording, recorded, fallback): RaceRecording's handler of barrier_all() and the like\n"
              "(an after handler, or the call's fast handler).",
    .tp_basicsize = sizeof(WorldSync),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)world_sync_init,
    .tp_dealloc = (destructor)world_sync_dealloc,
    .tp_traverse = (traverseproc)world_sync_traverse,
    .tp_clear = (inquiry)world_sync_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(WorldSync, vectorcall),
};

/* ---------------------------------------------------------------------------------------------
 * Access: RaceRecording.access(a, op, mode, line[, lo, hi, fp, info, value]) for a load or store
 * of symmetric memory that touches the last one of its line, or of memory no one else reaches */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *rec, *counts, *fallback, *memory, *info, *cache, *slices, *merge, *starts, *add, *events;
    long long *n; /* counts' items */
    Layout layout;
    Py_ssize_t lo, hi, fp;
} Access;

static PyTypeObject AccessType;

/* 1: done; 0: not a case for C (the caller hands the call to Python); -1: an error */
static int access_c(Access *self, PyObject *a, PyObject *op, PyObject *mode, PyObject *line, PyObject *lo,
                    PyObject *hi, PyObject *fp, PyObject *info) {
    int none_in_flight = PyList_Check(self->starts) && PyList_GET_SIZE(self->starts) == 0;
    if (!none_in_flight || !PyArray_Check(a)) return 0;
    if (info == NULL && numpy_owned(a)) {
        self->n[C_OPS]++;
        return 1;
    }
    PyObject *own = info == NULL ? cached_info(&self->layout, self->cache, self->info, a) : Py_NewRef(info);
    if (own == NULL) return -1;
    int done = 0;
    PyObject *key = NULL, *event = NULL, *n_async = NULL;
    if (!PyTuple_Check(own) || PyTuple_GET_SIZE(own) != 10) goto out;
    PyObject *space = PyTuple_GET_ITEM(own, 1), *dtype = PyTuple_GET_ITEM(own, 6);
    if (lo == NULL) lo = PyTuple_GET_ITEM(own, 3), hi = PyTuple_GET_ITEM(own, 4), fp = PyTuple_GET_ITEM(own, 9);
    if (PyUnicode_Check(space) && PyUnicode_Compare(space, s_priv) == 0) { /* nothing in flight uses it */
        self->n[C_OPS]++;
        done = 1;
        goto out;
    }
    done = -1;
    self->n[C_LOCAL]++;
    if ((n_async = PyLong_FromLongLong(self->n[C_ASYNC])) == NULL) goto out;
    if ((key = PyTuple_Pack(7, s_mem, op, line, mode, space, dtype, n_async)) == NULL) goto out;
    PyObject *last = PyDict_GetItemWithError(self->merge, key);
    if (last == NULL && PyErr_Occurred()) goto out;
    int truncated = self->n[C_TRUNCATED] != NOT_TRUNCATED;
    if (last != NULL && !truncated && fp == Py_None && PyList_Check(last) &&
        PyList_GET_SIZE(last) > self->fp && PyList_GET_ITEM(last, self->fp) == Py_None) {
        PyObject *last_lo = PyList_GET_ITEM(last, self->lo), *last_hi = PyList_GET_ITEM(last, self->hi);
        int a1 = le(lo, last_hi), a2 = le(last_lo, hi);
        if (a1 < 0 || a2 < 0) goto out;
        if (a1 && a2) { /* touching the last access of this line: merged so, without the event */
            Py_INCREF(last);
            int lower = PyObject_RichCompareBool(lo, last_lo, Py_LT), higher = PyObject_RichCompareBool(hi, last_hi, Py_GT);
            self->n[C_OPS]++;
            int ok = lower >= 0 && higher >= 0 &&
                     (!lower || PyList_SetItem(last, self->lo, Py_NewRef(lo)) == 0) &&
                     (!higher || PyList_SetItem(last, self->hi, Py_NewRef(hi)) == 0);
            Py_DECREF(last);
            done = ok ? 1 : -1;
            goto out;
        }
    }
    if ((event = event_list(9)) == NULL) goto out;
    PyObject *items[9] = {s_mem, op, line, mode, space, lo, hi, dtype, fp};
    for (int i = 0; i < 9; i++) PyList_SET_ITEM(event, i, Py_NewRef(items[i]));
    if (last == NULL && !truncated) { /* RaceRecording._add of an event with a new key */
        self->n[C_OPS]++;
        if (full(self->n, self->events)) /* the cap: nothing more is recorded, and the check says where it stopped */
            done = truncate_at(self->n, line) == 0 ? 1 : -1;
        else
            done = PyList_Append(self->events, event) == 0 && PyDict_SetItem(self->merge, key, event) == 0 ? 1 : -1;
        goto out;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(self->add, event, key, NULL);
    if (r != NULL) {
        Py_DECREF(r);
        done = 1;
    }
out:
    Py_DECREF(own);
    Py_XDECREF(key);
    Py_XDECREF(event);
    Py_XDECREF(n_async);
    return done;
}

/* access(a, op, mode, line) as the hooks call it: C when it can, else the Python method */
static int access4(Access *self, PyObject *a, PyObject *op, PyObject *mode, PyObject *line) {
    int done = access_c(self, a, op, mode, line, NULL, NULL, NULL, NULL);
    if (done) return done < 0 ? -1 : 0;
    PyObject *args[4] = {a, op, mode, line};
    PyObject *r = PyObject_Vectorcall(self->fallback, args, 4, NULL);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static PyObject *access_vectorcall(Access *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    /* (a, op, mode, line[, lo, hi, fp, info]) without a value or keywords */
    if (kwnames == NULL && (n == 4 || n == 8 || (n == 9 && args[8] == Py_None))) {
        PyObject *info = n > 4 && args[7] != Py_None ? args[7] : NULL;
        int whole = n == 4 || args[4] == Py_None;
        int done = access_c(self, args[0], args[1], args[2], args[3], whole ? NULL : args[4], whole ? NULL : args[5],
                            whole ? NULL : args[6], info);
        if (done < 0) return NULL;
        if (done) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int access_init(Access *self, PyObject *args, PyObject *kwds) {
    PyObject *rec, *fallback, *fields, *memory = NULL, *private = NULL;
    if (!PyArg_ParseTuple(args, "OOO!:Access", &rec, &fallback, &PyDict_Type, &fields)) return -1;
    if (!ready()) return -1;
    const char *names[3] = {"lo", "hi", "fp"};
    Py_ssize_t *at[3] = {&self->lo, &self->hi, &self->fp};
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyDict_GetItemString(fields, names[i]);
        if (v == NULL || (*at[i] = PyLong_AsSsize_t(v)) < 0 || *at[i] >= 9) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "field %s of a mem event is not known", names[i]);
            return -1;
        }
    }
    int ok = (memory = PyObject_GetAttrString(rec, "memory")) && (private = PyObject_GetAttrString(rec, "private"));
    if (ok) {
        Py_XSETREF(self->rec, Py_NewRef(rec));
        Py_XSETREF(self->counts, counts_of(rec, &self->n));
        Py_XSETREF(self->fallback, Py_NewRef(fallback));
        Py_XSETREF(self->memory, Py_NewRef(memory));
        Py_XSETREF(self->info, PyObject_GetAttrString(memory, "info"));
        Py_XSETREF(self->cache, PyObject_GetAttr(memory, s_cache));
        Py_XSETREF(self->slices, PyObject_GetAttr(memory, s_slices));
        Py_XSETREF(self->merge, PyObject_GetAttrString(rec, "merge"));
        Py_XSETREF(self->starts, PyObject_GetAttr(private, s_starts));
        Py_XSETREF(self->add, PyObject_GetAttrString(rec, "_add"));
        Py_XSETREF(self->events, PyObject_GetAttrString(rec, "events"));
        ok = self->counts && self->events && PyList_Check(self->events) && layout_read(&self->layout, memory) == 0 &&
             self->info &&
             self->cache && PyDict_Check(self->cache) && self->slices && PyDict_Check(self->slices) &&
             self->merge && PyDict_Check(self->merge) && self->starts && PyList_Check(self->starts) && self->add;
        if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "not a RaceRecording");
    }
    Py_XDECREF(memory);
    Py_XDECREF(private);
    self->vectorcall = (vectorcallfunc)access_vectorcall;
    return ok ? 0 : -1;
}

static int access_traverse(Access *self, visitproc visit, void *arg) {
    Py_VISIT(self->rec);
    Py_VISIT(self->counts);
    Py_VISIT(self->fallback);
    Py_VISIT(self->memory);
    Py_VISIT(self->info);
    Py_VISIT(self->cache);
    Py_VISIT(self->slices);
    Py_VISIT(self->merge);
    Py_VISIT(self->starts);
    Py_VISIT(self->add);
    Py_VISIT(self->events);
    int visited = layout_traverse(&self->layout, visit, arg);
    if (visited) return visited;
    return 0;
}

static int access_clear(Access *self) {
    Py_CLEAR(self->rec);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->memory);
    Py_CLEAR(self->info);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->slices);
    Py_CLEAR(self->merge);
    Py_CLEAR(self->starts);
    Py_CLEAR(self->add);
    Py_CLEAR(self->events);
    layout_clear(&self->layout);
    return 0;
}

static void access_dealloc(Access *self) {
    PyObject_GC_UnTrack(self);
    access_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject AccessType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shmem_notebook_record.Access",
    .tp_doc = "Access(recording, fallback, fields): RaceRecording.access for the usual loads and stores.",
    .tp_basicsize = sizeof(Access),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)access_init,
    .tp_dealloc = (destructor)access_dealloc,
    .tp_traverse = (traverseproc)access_traverse,
    .tp_clear = (inquiry)access_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Access, vectorcall),
};

/* ---------------------------------------------------------------------------------------------
 * the hooks' get (x[index]) and read (a name or value used whole) */

static int note_element(PyObject *rec, PyObject *x, PyObject *index, PyObject *line, PyObject *op, PyObject *mode,
                        PyObject *value);

/* rec.access (new reference): the fed recording's, found when it was fed */
static PyObject *access_of(PyObject *rec) {
    return rec == fed && fed_access != NULL ? Py_NewRef(fed_access) : PyObject_GetAttr(rec, s_access);
}

/* 1 when rec.access is this module's Access (every recording made while the module is loaded), 0 if
 * not, -1 on error */
static int ours(PyObject *rec) {
    PyObject *access = access_of(rec);
    if (access == NULL) return -1;
    int yes = Py_IS_TYPE(access, &AccessType);
    Py_DECREF(access);
    return yes;
}

/* AddressBook.view's hit: the same slice of the same array, of the same shape and strides */
static int view_known(Access *book, PyObject *x, PyObject *index, PyObject *r) {
    PySliceObject *s = (PySliceObject *)index;
    PyObject *slices = book->slices, *cache = book->cache, *id = PyLong_FromVoidPtr(x);
    PyObject *key = id ? PyTuple_Pack(4, id, s->start, s->stop, s->step) : NULL;
    int hit = -1;
    if (key == NULL) goto done;
    PyObject *known = PyDict_GetItemWithError(slices, key);
    hit = 0;
    if (known == NULL) {
        hit = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (!PyTuple_Check(known) || PyTuple_GET_SIZE(known) != 4 || PyWeakref_GetObject(PyTuple_GET_ITEM(known, 0)) != x)
        goto done;
    PyArrayObject *a = (PyArrayObject *)x;
    PyObject *shape = PyTuple_GET_ITEM(known, 1), *strides = PyTuple_GET_ITEM(known, 2), *rest = PyTuple_GET_ITEM(known, 3);
    int nd = PyArray_NDIM(a);
    if (!PyTuple_Check(shape) || !PyTuple_Check(strides) || !PyTuple_Check(rest) || PyTuple_GET_SIZE(rest) != 9 ||
        PyTuple_GET_SIZE(shape) != nd || PyTuple_GET_SIZE(strides) != nd)
        goto done;
    for (int i = 0; i < nd; i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)), t = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
        if (PyErr_Occurred()) {
            hit = -1;
            goto done;
        }
        if (d != PyArray_DIM(a, i) || t != PyArray_STRIDE(a, i)) goto done;
    }
    PyObject *found = PyTuple_New(10), *ref = PyWeakref_NewRef(r, NULL), *rid = PyLong_FromVoidPtr(r);
    if (found == NULL || ref == NULL || rid == NULL) {
        Py_XDECREF(found);
        Py_XDECREF(ref);
        Py_XDECREF(rid);
        hit = -1;
        goto done;
    }
    PyTuple_SET_ITEM(found, 0, ref);
    for (int i = 0; i < 9; i++) PyTuple_SET_ITEM(found, i + 1, Py_NewRef(PyTuple_GET_ITEM(rest, i)));
    hit = PyDict_SetItem(cache, rid, found) < 0 ? -1 : 1;
    Py_DECREF(found);
    Py_DECREF(rid);
done:
    Py_XDECREF(id);
    Py_XDECREF(key);
    return hit;
}

static PyObject *hook_get(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "get(x, index, line) takes 3 arguments");
        return NULL;
    }
    PyObject *x = args[0], *index = args[1];
    PyObject *r = PyObject_GetItem(x, index);
    if (r == NULL) return NULL;
    PyObject *rec = fed;
    if (rec == NULL || inside()) return r;
    int c = ours(rec);
    if (c < 0) goto fail;
    if (c && PyArray_Check(x) && !PyArray_Check(r)) { /* an element */
        Py_INCREF(rec);
        int done = note_element(rec, x, index, args[2], s_load, s_read, NULL);
        Py_DECREF(rec);
        if (done < 0) goto fail;
        return r;
    }
    if (!(c && PyArray_Check(x) && PyArray_Check(r) && PySlice_Check(index))) {
        PyObject *rargs[4] = {x, index, args[2], r};
        PyObject *out = PyObject_Vectorcall(get_rest, rargs, 4, NULL);
        Py_DECREF(r);
        return out;
    }
    /* a view: memory is counted when the view is used; noted unless NumPy owns it and nothing is in
     * flight, or unless it is C-contiguous (fast_info finds where it is when it is used) */
    PyArrayObject *view = (PyArrayObject *)r;
    if (PyArray_IS_C_CONTIGUOUS(view) && PyArray_SIZE(view) > 0) return r;
    PyObject *book = access_of(rec);
    if (book == NULL) goto fail;
    Access *a = (Access *)book;
    if (PyList_GET_SIZE(a->starts) || !numpy_owned(x)) {
        int hit = view_known(a, x, index, r);
        if (hit == 0) {
            PyObject *vargs[4] = {a->memory, x, index, r};
            PyObject *found = PyObject_VectorcallMethod(s_view, vargs, 4, NULL);
            hit = found ? 1 : -1;
            Py_XDECREF(found);
        }
        if (hit < 0) {
            Py_DECREF(book);
            goto fail;
        }
    }
    Py_DECREF(book);
    return r;
fail:
    Py_DECREF(r);
    return NULL;
}

/* rec.access(a, op, mode, line, lo, hi, fp, info[, value]): C when it can, else Python (0, or -1) */
static int note(PyObject *rec, PyObject *a, PyObject *op, PyObject *mode, PyObject *line, PyObject *lo, PyObject *hi,
                PyObject *fp, PyObject *info, PyObject *value) {
    PyObject *access = access_of(rec);
    if (access == NULL) return -1;
    int done = 0;
    if (Py_IS_TYPE(access, &AccessType) && value == NULL)
        done = lo == NULL ? access4((Access *)access, a, op, mode, line)
                          : access_c((Access *)access, a, op, mode, line, lo, hi, fp, info);
    if (done == 0 && (lo != NULL || !Py_IS_TYPE(access, &AccessType))) {
        PyObject *args[9] = {a, op, mode, line, lo, hi, fp, info, value};
        PyObject *r = PyObject_Vectorcall(access, args, lo == NULL ? 4 : value == NULL ? 8 : 9, NULL);
        done = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_DECREF(access);
    return done < 0 ? -1 : 0;
}

/* the bytes of x[index] for 1-D x and an int or a unit-strided slice, as hooks.element_range
 * finds them; other indices are its to find. *lo NULL: nothing touched. 0, or -1 */
static int element_range(PyObject *rec, PyObject *x, PyObject *index, PyObject *info, PyObject **lo, PyObject **hi,
                         PyObject **fp) {
    long long addr, itemsize, stride, n;
    *lo = *hi = *fp = NULL;
    if (as_ll(info, 2, &addr) < 0 || as_ll(info, 5, &itemsize) < 0 || as_ll(info, 7, &stride) < 0 ||
        as_ll(info, 8, &n) < 0)
        return -1;
    if (stride && (PyLong_Check(index) || PyArray_IsScalar(index, Integer))) {
        Py_ssize_t i = PyNumber_AsSsize_t(index, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) return -1;
        if (i < 0) i += n;
        *lo = PyLong_FromLongLong(addr + i * stride);
        *hi = PyLong_FromLongLong(addr + i * stride + itemsize);
        *fp = Py_NewRef(Py_None);
        return *lo && *hi ? 0 : -1;
    }
    if (stride && PySlice_Check(index)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(index, &start, &stop, &step) < 0) return -1;
        Py_ssize_t count = PySlice_AdjustIndices((Py_ssize_t)n, &start, &stop, step);
        if (count <= 0) return 0;
        if (stride * step == itemsize) {
            *lo = PyLong_FromLongLong(addr + start * stride);
            *hi = PyLong_FromLongLong(addr + start * stride + count * itemsize);
            *fp = Py_NewRef(Py_None);
            return *lo && *hi ? 0 : -1;
        }
    }
    PyObject *args[4] = {rec, x, index, info};
    PyObject *span = PyObject_Vectorcall(element_range_py, args, 4, NULL);
    if (span == NULL) return -1;
    int r = 0;
    if (PyTuple_Check(span) && PyTuple_GET_SIZE(span) == 3) {
        *lo = Py_NewRef(PyTuple_GET_ITEM(span, 0));
        *hi = Py_NewRef(PyTuple_GET_ITEM(span, 1));
        *fp = Py_NewRef(PyTuple_GET_ITEM(span, 2));
    } else if (span != Py_None) {
        PyErr_SetString(PyExc_TypeError, "hooks.element_range gave no (lo, hi, footprint)");
        r = -1;
    }
    Py_DECREF(span);
    return r;
}

/* what hooks._get and _set note of x[index] for an ndarray x (hooks._wanted, then the range) */
static int note_element(PyObject *rec, PyObject *x, PyObject *index, PyObject *line, PyObject *op, PyObject *mode,
                        PyObject *value) {
    PyObject *book = access_of(rec);
    if (book == NULL) return -1;
    if (!Py_IS_TYPE(book, &AccessType)) {
        Py_DECREF(book);
        PyErr_SetString(PyExc_TypeError, "the recording's access is not this module's");
        return -1;
    }
    Access *a = (Access *)book;
    int none_in_flight = PyList_GET_SIZE(a->starts) == 0;
    PyObject *info = NULL, *lo = NULL, *hi = NULL, *fp = NULL;
    int r = 0;
    if (none_in_flight && numpy_owned(x)) goto done;
    r = -1;
    if ((info = cached_info(&a->layout, a->cache, a->info, x)) == NULL) goto done;
    if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 10) {
        PyErr_SetString(PyExc_TypeError, "AddressBook.info gave no 10-tuple");
        goto done;
    }
    PyObject *space = PyTuple_GET_ITEM(info, 1);
    if (none_in_flight && PyUnicode_Check(space) && PyUnicode_Compare(space, s_priv) == 0) {
        r = 0;
        goto done;
    }
    if (element_range(rec, x, index, info, &lo, &hi, &fp) < 0) goto done;
    r = lo == NULL ? 0 : note(rec, x, op, mode, line, lo, hi, fp, info, value);
done:
    Py_DECREF(book);
    Py_XDECREF(info);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(fp);
    return r;
}

/* the recording the hooks feed, or NULL when none is or a recorded call runs (borrowed) */
static PyObject *recording(void) { return fed == NULL || inside() ? NULL : fed; }

static PyObject *hook_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) return PyObject_Vectorcall(read_py, args, nargs, NULL);
    if (PyArray_Check(args[0])) {
        PyObject *rec = recording();
        if (rec != NULL) {
            Py_INCREF(rec);
            int r = note(rec, args[0], s_load, s_read, args[1], NULL, NULL, NULL, NULL, NULL);
            Py_DECREF(rec);
            if (r < 0) return NULL;
        }
    }
    return Py_NewRef(args[0]);
}

/* an index array, a mask or a list (alone or in a tuple): hooks._set notes its elements one by one */
static int fancy(PyObject *index) {
    if (PyArray_Check(index) || PyList_Check(index)) return 1;
    if (PyTuple_Check(index))
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index); i++)
            if (PyArray_Check(PyTuple_GET_ITEM(index, i)) || PyList_Check(PyTuple_GET_ITEM(index, i))) return 1;
    return 0;
}

static PyObject *hook_set(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "set(x, index, value, line) takes 4 arguments");
        return NULL;
    }
    PyObject *x = args[0], *index = args[1], *value = args[2], *line = args[3];
    PyObject *rec = recording();
    int c = rec != NULL ? ours(rec) : 1;
    if (c < 0) return NULL;
    if (rec != NULL && (!c || !PyArray_Check(x) || fancy(index))) /* a flat iterator, an index array or
                                                                     * mask, not NumPy's, or not ours: Python's */
        return PyObject_Vectorcall(set_py, args, nargs, NULL);
    if (rec != NULL) {
        Py_INCREF(rec);
        int r = PyArray_Check(value) ? note(rec, value, s_load, s_read, line, NULL, NULL, NULL, NULL, NULL) : 0;
        int scalar = PyLong_Check(value) || PyArray_IsScalar(value, Integer);
        if (r == 0) r = note_element(rec, x, index, line, s_store, s_write, scalar ? value : NULL);
        Py_DECREF(rec);
        if (r < 0) return NULL;
    }
    if (PyObject_SetItem(x, index, value) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *setup(PyObject *module, PyObject *args) {
    PyObject *d, *files, *lo, *own, *python, *rest, *rd, *st, *er;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!:setup", &PyList_Type, &d, &PySet_Type, &files, &PyList_Type, &lo, &own,
                          &PyDict_Type, &python))
        return NULL;
    if (PyList_GET_SIZE(d) != 1 || PyList_GET_SIZE(lo) != 1) {
        PyErr_SetString(PyExc_ValueError, "depth and line_of must be lists of one item");
        return NULL;
    }
    if ((rest = PyDict_GetItemString(python, "get_rest")) == NULL || (rd = PyDict_GetItemString(python, "read")) == NULL ||
        (st = PyDict_GetItemString(python, "set")) == NULL ||
        (er = PyDict_GetItemString(python, "element_range")) == NULL) {
        PyErr_SetString(PyExc_ValueError, "python must give get_rest, read, set and element_range");
        return NULL;
    }
    Py_XSETREF(depth, Py_NewRef(d));
    Py_XSETREF(cell_files, Py_NewRef(files));
    Py_XSETREF(line_finder, Py_NewRef(lo));
    Py_XSETREF(own_cell_line, Py_NewRef(own));
    Py_XSETREF(get_rest, Py_NewRef(rest));
    Py_XSETREF(read_py, Py_NewRef(rd));
    Py_XSETREF(set_py, Py_NewRef(st));
    Py_XSETREF(element_range_py, Py_NewRef(er));
    Py_RETURN_NONE;
}

static PyObject *feed(PyObject *module, PyObject *rec) {
    if (!ready()) return NULL;
    PyObject *access = NULL;
    if (rec != Py_None) {
        access = PyObject_GetAttr(rec, s_access);
        if (access == NULL) return NULL;
        if (!Py_IS_TYPE(access, &AccessType)) Py_CLEAR(access);
    }
    Py_XSETREF(fed, rec == Py_None ? NULL : Py_NewRef(rec));
    Py_XSETREF(fed_access, access);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
 * distinct(events): the recording's events as its distinct ones and, per event, which one it is,
 * so that a loop's repeated events cross to the client once (see shmem_notebook/distinct.py) */

/* a hash of x in which a list or tuple hashes by its items; -1 with an error if some item has none */
static Py_hash_t content_hash(PyObject *x) {
    if (PyList_Check(x) || PyTuple_Check(x)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(x);
        Py_uhash_t h = 0x345678UL + (Py_uhash_t)n;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_hash_t k = content_hash(PySequence_Fast_GET_ITEM(x, i));
            if (k == -1) return -1;
            h = (h ^ (Py_uhash_t)k) * 1000003UL;
        }
        return h == (Py_uhash_t)-1 ? 1 : (Py_hash_t)h;
    }
    return PyObject_Hash(x);
}

/* is x the same as y: the same type and value (floats bit for bit, so 0.0 is not -0.0, nor 1 1.0) */
static int same(PyObject *x, PyObject *y) {
    if (x == y) return 1;
    if (Py_TYPE(x) != Py_TYPE(y)) return 0;
    if (PyFloat_CheckExact(x)) {
        double a = PyFloat_AS_DOUBLE(x), b = PyFloat_AS_DOUBLE(y);
        return memcmp(&a, &b, sizeof a) == 0;
    }
    if (PyList_Check(x) || PyTuple_Check(x)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(x);
        if (n != PySequence_Fast_GET_SIZE(y)) return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int r = same(PySequence_Fast_GET_ITEM(x, i), PySequence_Fast_GET_ITEM(y, i));
            if (r != 1) return r;
        }
        return 1;
    }
    return PyObject_RichCompareBool(x, y, Py_EQ);
}

static PyObject *distinct(PyObject *module, PyObject *events) {
    if (!PyList_Check(events)) {
        PyErr_SetString(PyExc_TypeError, "distinct() takes a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(events), size = 16;
    while (size < 2 * n) size *= 2;
    Py_ssize_t *slots = PyMem_Malloc(size * sizeof *slots); /* index into table, or -1 */
    Py_hash_t *hashes = PyMem_Malloc(size * sizeof *hashes);
    PyObject *table = PyList_New(0), *index = PyList_New(n), *out = NULL;
    if (slots == NULL || hashes == NULL || table == NULL || index == NULL) goto done;
    for (Py_ssize_t s = 0; s < size; s++) slots[s] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        Py_ssize_t found = -1;
        Py_hash_t h = content_hash(e);
        if (h == -1) { /* unhashable: an entry of its own */
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
            PyErr_Clear();
        } else {
            Py_ssize_t s = (Py_ssize_t)((Py_uhash_t)h & (Py_uhash_t)(size - 1));
            for (; slots[s] != -1; s = (s + 1) & (size - 1)) {
                if (hashes[s] != h) continue;
                int r = same(e, PyList_GET_ITEM(table, slots[s]));
                if (r < 0) goto done;
                if (r) {
                    found = slots[s];
                    break;
                }
            }
            if (found == -1) {
                slots[s] = PyList_GET_SIZE(table);
                hashes[s] = h;
            }
        }
        if (found == -1) {
            found = PyList_GET_SIZE(table);
            if (PyList_Append(table, e) < 0) goto done;
        }
        PyObject *k = PyLong_FromSsize_t(found);
        if (k == NULL) goto done;
        PyList_SET_ITEM(index, i, k);
    }
    out = PyTuple_Pack(2, table, index);
done:
    PyMem_Free(slots);
    PyMem_Free(hashes);
    Py_XDECREF(table);
    Py_XDECREF(index);
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * Index: hooks._Index, whose item is its key: a rewritten subscript's index made by the interpreter's
 * own BUILD_SLICE (ix[1:2] -> slice(1, 2)), not by a call of the name slice (three lookups and a call) */
static PyObject *index_subscript(PyObject *self, PyObject *key) { return Py_NewRef(key); }

static PyMappingMethods index_mapping = {0, index_subscript, 0};

static PyTypeObject IndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_shmem_notebook_record.Index",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_mapping = &index_mapping,
    .tp_new = PyType_GenericNew,
    .tp_doc = "Index()[key] -> key: a subscript's index as a value.",
};

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(depth, cell_files, line_of, cell_line, python): what the functions read (python: the hooks "
     "get_rest, read, set and element_range that take the cases C leaves)."},
    {"feed", feed, METH_O,
     "feed(recording): the recording the hooks note into from now on (None: none); its access is read now."},
    {"get", (PyCFunction)(void (*)(void))hook_get, METH_FASTCALL, "get(x, index, line) -> x[index], noted."},
    {"read", (PyCFunction)(void (*)(void))hook_read, METH_FASTCALL, "read(value, line) -> value, noted."},
    {"set", (PyCFunction)(void (*)(void))hook_set, METH_FASTCALL, "set(x, index, value, line): x[index] = value, noted."},
    {"distinct", distinct, METH_O,
     "distinct(events) -> (table, index): the distinct events (the same type and value: floats bit for bit) in "
     "order of first appearance, and per event its position in table."},
    {NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_shmem_notebook_record", NULL, -1, methods};

PyMODINIT_FUNC PyInit__shmem_notebook_record(void) {
    import_array();
    if (PyType_Ready(&RecordedType) < 0 || PyType_Ready(&PlainRMAType) < 0 || PyType_Ready(&AccessType) < 0 ||
        PyType_Ready(&WorldSyncType) < 0 || PyType_Ready(&IndexType) < 0)
        return NULL;
    struct {
        PyObject **to;
        const char *s;
    } names[] = {{&s_starts, "starts"},
                 {&s_slices, "slices"},       {&s_cache, "cache"},            {&s_view, "view"},
                 {&s_rma, "rma"},
                 {&s_priv, "priv"},           {&s_mem, "mem"},                {&s_access, "access"},
                 {&s_load, "load"},              {&s_read, "read"},
                 {&s_store, "store"},         {&s_write, "write"},            {&s_sync, "sync"},
                 {&s_heap, "heap"},           {&s_peers, "peers"},            {&s_sym, "sym"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].to = PyUnicode_InternFromString(names[i].s)) == NULL) return NULL;
    s_zero = PyLong_FromLong(0);
    if ((dtype_strs = PyDict_New()) == NULL) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Recorded", (PyObject *)&RecordedType) < 0 ||
        PyModule_AddObjectRef(m, "PlainRMA", (PyObject *)&PlainRMAType) < 0 ||
        PyModule_AddObjectRef(m, "Access", (PyObject *)&AccessType) < 0 ||
        PyModule_AddObjectRef(m, "WorldSync", (PyObject *)&WorldSyncType) < 0 ||
        PyModule_AddObjectRef(m, "Index", (PyObject *)&IndexType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
