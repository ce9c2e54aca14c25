/* MotifZip's hot loops in C, step for step as motif_discovery.py's Python, which is their reference (tests
 * compare the two on real and generated libraries):
 *
 * groups(runs, texts, tokens) (groups_of) takes the runs of one key (a dict of Occurrence -> ports, in
 * occurrence order), each skill's SkillText and each skill's node token counts. It clusters the runs by
 * similar text (min-hash sketch postings, word 3-gram Jaccard) and returns, for each cluster and each ports
 * set in it, the candidate: (ports, occurrences one per skill, prototype, prototype tokens, gain), when it has
 * MIN_OCCURRENCES skills and a positive gain. Grouper(texts, tokens)(runs) is the same for one bucket at a
 * time, each skill's text and tokens read once for all its calls (motif_discovery.grouper).
 *
 * file_runs(...) (motif_runs.file_runs_of) files a skill's runs in the buckets of their keys,
 * shingled(node_terms) (shingled_in_python) hashes a skill's words and 3-grams for its SkillText, and
 * chosen(candidates, tokens) (macro_index.chosen_in_python) makes a rebuild's greedy choice among the candidates.
 *
 * Each call holds the GIL throughout (the longest, a large bucket's groups, takes milliseconds) and frees what
 * it allocated before it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUN 3
#define SKETCH 4
#define MAX_COMPARED 8
#define MAX_POSTING 64
#define MIN_OCCURRENCES 2
#define REFERENCE_TOKENS 12
#define PRIME 0x100000001B3ULL
#ifndef VERSION /* (a test builds one with another, as if left from older sources) */
#define VERSION 4 /* what motif_discovery.py expects: a build left from older sources is not used */
#endif

/* -- growable arrays --------------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t size, capacity;
} Vec;

static int vec_push(Vec *vec, Py_ssize_t value) {
    if (vec->size == vec->capacity) {
        Py_ssize_t capacity = vec->capacity ? 2 * vec->capacity : 4;
        Py_ssize_t *items = PyMem_Realloc(vec->items, capacity * sizeof(Py_ssize_t));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        vec->items = items;
        vec->capacity = capacity;
    }
    vec->items[vec->size++] = value;
    return 0;
}

static int grow(void **items, Py_ssize_t *capacity, Py_ssize_t needed, size_t item_size) {
    if (needed <= *capacity) return 0;
    Py_ssize_t capacity_now = *capacity ? *capacity : 16;
    while (capacity_now < needed) capacity_now *= 2;
    void *grown = PyMem_Realloc(*items, capacity_now * item_size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *capacity = capacity_now;
    return 0;
}

/* -- a hash table of slots: open addressing, keys compared by the caller ----------------------------- */

typedef struct {
    uint64_t *hashes;
    Py_ssize_t *values; /* -1: empty */
    Py_ssize_t capacity, size;
} Table;

static int table_init(Table *table, Py_ssize_t expected) {
    Py_ssize_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    table->hashes = PyMem_Malloc(capacity * sizeof(uint64_t));
    table->values = PyMem_Malloc(capacity * sizeof(Py_ssize_t));
    if (table->hashes == NULL || table->values == NULL) {
        PyMem_Free(table->hashes);
        PyMem_Free(table->values);
        table->hashes = NULL;
        table->values = NULL;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < capacity; i++) table->values[i] = -1;
    table->capacity = capacity;
    table->size = 0;
    return 0;
}

static void table_free(Table *table) {
    PyMem_Free(table->hashes);
    PyMem_Free(table->values);
}

/* The slot holding a key of this hash that `same(context, value)` accepts, or the empty slot where it
 * goes. */
typedef int (*Same)(void *context, Py_ssize_t value);

static Py_ssize_t table_find(Table *table, uint64_t hash, Same same, void *context) {
    Py_ssize_t mask = table->capacity - 1, slot = (Py_ssize_t)(hash & (uint64_t)mask);
    for (;;) {
        Py_ssize_t value = table->values[slot];
        if (value < 0 || (table->hashes[slot] == hash && same(context, value))) return slot;
        slot = (slot + 1) & mask;
    }
}

static int table_put(Table *table, Py_ssize_t slot, uint64_t hash, Py_ssize_t value) {
    table->hashes[slot] = hash;
    table->values[slot] = value;
    if (++table->size * 2 <= table->capacity) return 0;
    Table grown;
    if (table_init(&grown, table->capacity) < 0) return -1;
    for (Py_ssize_t i = 0; i < table->capacity; i++) {
        if (table->values[i] < 0) continue;
        Py_ssize_t mask = grown.capacity - 1, to = (Py_ssize_t)(table->hashes[i] & (uint64_t)mask);
        while (grown.values[to] >= 0) to = (to + 1) & mask;
        grown.hashes[to] = table->hashes[i];
        grown.values[to] = table->values[i];
    }
    grown.size = table->size;
    table_free(table);
    *table = grown;
    return 0;
}

static uint64_t mix(uint64_t hash) { /* splitmix64's finalizer */
    hash ^= hash >> 30;
    hash *= 0xBF58476D1CE4E5B9ULL;
    hash ^= hash >> 27;
    hash *= 0x94D049BB133111EBULL;
    return hash ^ (hash >> 31);
}

/* -- the call's state ------------------------------------------------------------------------------- */

typedef struct {
    PyObject *name;       /* the skill's name, as a run's occurrence holds it */
    Py_buffer starts;     /* uint32: each node's first word */
    Py_buffer words;      /* uint32: word hashes */
    Py_buffer trigrams;   /* uint64: the 3-gram at each word */
    PyObject *tokens;     /* tuple of ints, from the tokens dict */
} Skill;

typedef struct {
    Py_ssize_t call, number;
} Met;

/* Each skill's text and token counts as the runs name them, read from the dicts once and kept (with references
 * to what they read) until freed: by one `groups` call, or by a Grouper for all of its calls. */
typedef struct {
    PyObject *texts, *tokens; /* the dicts */
    Skill *skills;
    Py_ssize_t count, capacity;
    Table table; /* name hash -> skill number */
    Met *met;    /* per skill: the last call that met it, and its number in that call */
    Py_ssize_t met_capacity, met_count;
    Py_ssize_t calls; /* calls made with it */
    int busy;         /* a call is under way: a call from inside it (Python code it ran) is refused */
} Skills;

typedef struct {
    PyObject *occurrence, *ports; /* borrowed from the runs */
    Py_ssize_t skill, ports_id, content;
    Py_ssize_t start, length;
    long long tokens;
} Run;

typedef struct {
    const char *bytes; /* the words (short texts) or 3-grams the shingles are made from */
    Py_ssize_t size;
    int short_text;
    Py_ssize_t shingles, count; /* its distinct shingles: pool[shingles : shingles + count], ascending */
    Py_ssize_t postings[SKETCH], n_postings;
    Py_ssize_t filed, joined; /* total posting length when last seen; the cluster it rejoins, or -1 */
    int seen;
} Content;

typedef struct {
    Py_ssize_t shingles, count; /* its founder's shingles */
    Vec members;
} Cluster;

typedef struct {
    Skills *known;
    Py_ssize_t *skills; /* the call's skills (numbered in order met) -> their number in `known` */
    Py_ssize_t n_skills, skills_capacity, call;
    Run *runs;
    Py_ssize_t n_runs;
    Content *contents;
    Py_ssize_t n_contents, contents_capacity;
    uint64_t *pool;
    Py_ssize_t pool_size, pool_capacity;
    Cluster *clusters;
    Py_ssize_t n_clusters, clusters_capacity;
    Vec *postings;
    Py_ssize_t n_postings, postings_capacity;
    uint64_t *posting_keys;
    Py_ssize_t posting_keys_capacity;
    Py_ssize_t *stamp_of, *slot_of; /* per cluster: the run that last counted it, and where */
    Py_ssize_t stamps_capacity, slots_capacity;
    PyObject **ports; /* distinct ports sets, borrowed */
    Py_ssize_t n_ports, ports_capacity;
    Table content_table, sketch_table;
} Call;

static Skill *skill_at(Call *call, Py_ssize_t number) { return &call->known->skills[call->skills[number]]; }

static void call_free(Call *call) {
    for (Py_ssize_t i = 0; i < call->n_clusters; i++) PyMem_Free(call->clusters[i].members.items);
    for (Py_ssize_t i = 0; i < call->n_postings; i++) PyMem_Free(call->postings[i].items);
    PyMem_Free(call->skills);
    PyMem_Free(call->runs);
    PyMem_Free(call->contents);
    PyMem_Free(call->pool);
    PyMem_Free(call->clusters);
    PyMem_Free(call->postings);
    PyMem_Free(call->posting_keys);
    PyMem_Free(call->stamp_of);
    PyMem_Free(call->slot_of);
    PyMem_Free(call->ports);
    table_free(&call->content_table);
    table_free(&call->sketch_table);
}

/* -- skills ------------------------------------------------------------------------------------------- */

static int skills_init(Skills *known, PyObject *texts, PyObject *tokens) {
    memset(known, 0, sizeof(Skills));
    if (table_init(&known->table, 16) < 0) return -1;
    known->texts = Py_NewRef(texts);
    known->tokens = Py_NewRef(tokens);
    return 0;
}

/* Releases what `known` holds, leaving it empty (and refusing calls: no texts) before any release can run code. */
static void skills_free(Skills *known) {
    Skills gone = *known;
    memset(known, 0, sizeof(Skills));
    for (Py_ssize_t i = 0; i < gone.count; i++) {
        Skill *skill = &gone.skills[i];
        PyBuffer_Release(&skill->starts);
        PyBuffer_Release(&skill->words);
        PyBuffer_Release(&skill->trigrams);
        Py_DECREF(skill->name);
        Py_DECREF(skill->tokens);
    }
    PyMem_Free(gone.skills);
    PyMem_Free(gone.met);
    table_free(&gone.table);
    Py_XDECREF(gone.texts);
    Py_XDECREF(gone.tokens);
}

typedef struct {
    Skills *known;
    PyObject *name;
    int error;
} SkillKey;

/* Whether two names are equal (the same object, as a run's skills mostly are, or equal strings). */
static int same_name(PyObject *known, PyObject *wanted, int *error) {
    if (known == wanted) return 1;
    int equal = PyObject_RichCompareBool(known, wanted, Py_EQ);
    if (equal < 0) *error = 1;
    return equal > 0;
}

static int same_skill(void *context, Py_ssize_t value) {
    SkillKey *key = context;
    return same_name(key->known->skills[value].name, key->name, &key->error);
}

static PyObject *starts_name, *words_name, *trigrams_name;

static int get_buffer(PyObject *text, PyObject *field, Py_buffer *view, Py_ssize_t item_size) {
    PyObject *value = PyObject_GetAttr(text, field);
    if (value == NULL) return -1;
    int failed = PyObject_GetBuffer(value, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT);
    Py_DECREF(value);
    if (failed) return -1;
    if (view->itemsize != item_size) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "SkillText.%U: expected %zd-byte items, got %zd", field, item_size,
                     view->itemsize);
        return -1;
    }
    return 0;
}

/* The number of a skill in `known`, its text and tokens read the first time it is named. */
static Py_ssize_t known_skill(Skills *known, PyObject *name) {
    Py_hash_t hash = PyObject_Hash(name);
    if (hash == -1) return -1;
    SkillKey key = {known, name, 0};
    Py_ssize_t slot = table_find(&known->table, (uint64_t)hash, same_skill, &key);
    if (key.error) return -1;
    if (known->table.values[slot] >= 0) return known->table.values[slot];
    if (grow((void **)&known->skills, &known->capacity, known->count + 1, sizeof(Skill)) < 0) return -1;
    Skill skill;
    PyObject *text = PyDict_GetItemWithError(known->texts, name);
    if (text == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
        return -1;
    }
    Py_INCREF(text); /* (reading its fields runs no code of ours, but the dict is not ours either) */
    PyObject *tokens = PyDict_GetItemWithError(known->tokens, name);
    if (tokens == NULL || !PyTuple_Check(tokens)) {
        if (tokens != NULL) PyErr_SetString(PyExc_TypeError, "a skill's token counts must be a tuple");
        else if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
        Py_DECREF(text);
        return -1;
    }
    skill.tokens = Py_NewRef(tokens);
    int failed = get_buffer(text, starts_name, &skill.starts, 4);
    if (!failed && (failed = get_buffer(text, words_name, &skill.words, 4)) != 0) PyBuffer_Release(&skill.starts);
    if (!failed && (failed = get_buffer(text, trigrams_name, &skill.trigrams, 8)) != 0) {
        PyBuffer_Release(&skill.starts);
        PyBuffer_Release(&skill.words);
    }
    Py_DECREF(text);
    if (failed) {
        Py_DECREF(skill.tokens);
        return -1;
    }
    skill.name = Py_NewRef(name);
    Py_ssize_t number = known->count++;
    known->skills[number] = skill; /* counted before anything can fail: skills_free releases it */
    return table_put(&known->table, slot, (uint64_t)hash, number) < 0 ? -1 : number;
}

/* The number in this call of the run's skill (numbered in the order the call meets them). */
static Py_ssize_t skill_of(Call *call, PyObject *name) {
    Skills *known = call->known;
    Py_ssize_t number = known_skill(known, name);
    if (number < 0) return -1;
    if (grow((void **)&known->met, &known->met_capacity, known->count, sizeof(Met)) < 0) return -1;
    for (; known->met_count < known->count; known->met_count++) known->met[known->met_count].call = 0;
    Met *met = &known->met[number];
    if (met->call == call->call) return met->number;
    if (grow((void **)&call->skills, &call->skills_capacity, call->n_skills + 1, sizeof(Py_ssize_t)) < 0) return -1;
    call->skills[call->n_skills] = number;
    met->call = call->call;
    return met->number = call->n_skills++;
}

/* -- runs --------------------------------------------------------------------------------------------- */

static Py_ssize_t ports_of(Call *call, PyObject *ports) {
    for (Py_ssize_t i = 0; i < call->n_ports; i++) {
        if (call->ports[i] == ports) return i;
    }
    for (Py_ssize_t i = 0; i < call->n_ports; i++) {
        int equal = PyObject_RichCompareBool(call->ports[i], ports, Py_EQ);
        if (equal < 0) return -1;
        if (equal) return i;
    }
    if (grow((void **)&call->ports, &call->ports_capacity, call->n_ports + 1, sizeof(PyObject *)) < 0) return -1;
    call->ports[call->n_ports] = ports;
    return call->n_ports++;
}

static int read_run(Call *call, Run *run, PyObject *occurrence, PyObject *ports, Py_ssize_t *last_skill,
                    PyObject **last_name) {
    if (!PyTuple_Check(occurrence) || PyTuple_GET_SIZE(occurrence) != 3) {
        PyErr_SetString(PyExc_TypeError, "a run's occurrence must be an Occurrence (skill, start, length)");
        return -1;
    }
    PyObject *name = PyTuple_GET_ITEM(occurrence, 0);
    Py_ssize_t skill = name == *last_name ? *last_skill : skill_of(call, name);
    if (skill < 0) return -1;
    *last_skill = skill;
    *last_name = name;
    run->occurrence = occurrence;
    run->ports = ports;
    run->skill = skill;
    run->start = PyLong_AsSsize_t(PyTuple_GET_ITEM(occurrence, 1));
    run->length = PyLong_AsSsize_t(PyTuple_GET_ITEM(occurrence, 2));
    if (PyErr_Occurred()) return -1;
    Skill *known = skill_at(call, skill);
    Py_ssize_t nodes = known->starts.len / 4 - 1;
    if (run->start < 0 || run->length < 1 || run->start > nodes || run->length > nodes - run->start ||
        run->length > PyTuple_GET_SIZE(known->tokens) - run->start) {
        PyErr_Format(PyExc_ValueError, "run %R lies outside its skill's nodes", occurrence);
        return -1;
    }
    long long sum = 0;
    for (Py_ssize_t i = run->start; i < run->start + run->length; i++) {
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(known->tokens, i));
        if (size == -1 && PyErr_Occurred()) return -1;
        if (__builtin_add_overflow(sum, size, &sum)) {
            PyErr_Format(PyExc_OverflowError, "the tokens of run %R do not fit in 64 bits", occurrence);
            return -1;
        }
    }
    run->tokens = sum;
    run->ports_id = ports_of(call, ports);
    return run->ports_id < 0 ? -1 : 0;
}

/* -- contents and their shingles ---------------------------------------------------------------------- */

typedef struct {
    Call *call;
    const char *bytes;
    Py_ssize_t size;
    int short_text;
} ContentKey;

static int same_content(void *context, Py_ssize_t value) {
    ContentKey *key = context;
    Content *known = &key->call->contents[value];
    return known->short_text == key->short_text && known->size == key->size &&
           memcmp(known->bytes, key->bytes, key->size) == 0;
}

static void sort_ascending(uint64_t *items, Py_ssize_t count) { /* quicksort, insertion sort when short */
    while (count > 16) {
        uint64_t pivot = items[count / 2], swap;
        Py_ssize_t i = 0, j = count - 1;
        for (;;) {
            while (items[i] < pivot) i++;
            while (items[j] > pivot) j--;
            if (i >= j) break;
            swap = items[i], items[i] = items[j], items[j] = swap;
            i++, j--;
        }
        if (j + 1 < count - j - 1) { /* the shorter side recurses: the depth stays logarithmic */
            sort_ascending(items, j + 1);
            items += j + 1;
            count -= j + 1;
        } else {
            sort_ascending(items + j + 1, count - j - 1);
            count = j + 1;
        }
    }
    for (Py_ssize_t i = 1; i < count; i++) {
        uint64_t item = items[i];
        Py_ssize_t j = i;
        for (; j > 0 && items[j - 1] > item; j--) items[j] = items[j - 1];
        items[j] = item;
    }
}

/* The content of a run's nodes (SkillText.content), found or added with its distinct shingles. */
static Py_ssize_t content_of(Call *call, Run *run) {
    Skill *skill = skill_at(call, run->skill);
    const uint32_t *starts = skill->starts.buf;
    Py_ssize_t first = starts[run->start], end = starts[run->start + run->length];
    if (end < first || end > skill->words.len / 4 || (end - first >= 3 && end - 2 > skill->trigrams.len / 8)) {
        PyErr_SetString(PyExc_ValueError, "a SkillText's starts lie outside its words");
        return -1;
    }
    ContentKey key = {call, NULL, 0, end - first < 3};
    if (key.short_text) {
        key.bytes = (const char *)((const uint32_t *)skill->words.buf + first);
        key.size = (end - first) * 4;
    } else {
        key.bytes = (const char *)((const uint64_t *)skill->trigrams.buf + first);
        key.size = (end - first - 2) * 8;
    }
    uint64_t hash = (uint64_t)key.size << 1 | (uint64_t)key.short_text, word;
    for (Py_ssize_t i = 0; i + 8 <= key.size; i += 8) {
        memcpy(&word, key.bytes + i, 8);
        hash = (hash ^ word) * 0x9E3779B97F4A7C15ULL;
    }
    if (key.size % 8) {
        word = 0;
        memcpy(&word, key.bytes + key.size - key.size % 8, key.size % 8);
        hash = (hash ^ word) * 0x9E3779B97F4A7C15ULL;
    }
    hash = mix(hash);
    Py_ssize_t slot = table_find(&call->content_table, hash, same_content, &key);
    if (call->content_table.values[slot] >= 0) return call->content_table.values[slot];

    Py_ssize_t count = key.short_text ? 1 : end - first - 2;
    if (grow((void **)&call->pool, &call->pool_capacity, call->pool_size + count, sizeof(uint64_t)) < 0) return -1;
    uint64_t *shingles = call->pool + call->pool_size;
    if (key.short_text) { /* motif_discovery._combine of the words */
        const uint32_t *words = (const uint32_t *)key.bytes;
        uint64_t combined = (uint64_t)(end - first);
        for (Py_ssize_t i = 0; i < end - first; i++) combined = combined * PRIME ^ words[i];
        shingles[0] = combined;
    } else {
        memcpy(shingles, key.bytes, count * 8);
        sort_ascending(shingles, count);
        Py_ssize_t distinct = 1;
        for (Py_ssize_t i = 1; i < count; i++) {
            if (shingles[i] != shingles[distinct - 1]) shingles[distinct++] = shingles[i];
        }
        count = distinct;
    }
    if (grow((void **)&call->contents, &call->contents_capacity, call->n_contents + 1, sizeof(Content)) < 0) return -1;
    Content *content = &call->contents[call->n_contents];
    memset(content, 0, sizeof(Content));
    content->bytes = key.bytes;
    content->size = key.size;
    content->short_text = key.short_text;
    content->shingles = call->pool_size;
    content->count = count;
    content->joined = -1;
    call->pool_size += count;
    if (table_put(&call->content_table, slot, hash, call->n_contents) < 0) return -1;
    return call->n_contents++;
}

typedef struct {
    Call *call;
    uint64_t shingle;
} ShingleKey;

static int same_shingle(void *context, Py_ssize_t value) {
    ShingleKey *key = context;
    return key->call->posting_keys[value] == key->shingle;
}

/* The posting of a sketch shingle (the clusters filed under it), made if new. */
static Py_ssize_t posting_of(Call *call, uint64_t shingle) {
    ShingleKey key = {call, shingle};
    uint64_t hash = mix(shingle);
    Py_ssize_t slot = table_find(&call->sketch_table, hash, same_shingle, &key);
    if (call->sketch_table.values[slot] >= 0) return call->sketch_table.values[slot];
    if (grow((void **)&call->postings, &call->postings_capacity, call->n_postings + 1, sizeof(Vec)) < 0 ||
        grow((void **)&call->posting_keys, &call->posting_keys_capacity, call->n_postings + 1, sizeof(uint64_t)) < 0)
        return -1;
    memset(&call->postings[call->n_postings], 0, sizeof(Vec));
    call->posting_keys[call->n_postings] = shingle;
    if (table_put(&call->sketch_table, slot, hash, call->n_postings) < 0) return -1;
    return call->n_postings++;
}

/* motif_discovery.similar of two ascending shingle lists: sizes within a factor 2, and Jaccard >= 0.5, that
 * is 3 * shared >= la + lb (the reference's float division is exact enough for the two to agree). The merge
 * stops as soon as the answer is known. */
static int similar(const uint64_t *a, Py_ssize_t la, const uint64_t *b, Py_ssize_t lb) {
    Py_ssize_t smaller = la < lb ? la : lb, larger = la < lb ? lb : la;
    if (2 * smaller < larger) return 0;
    Py_ssize_t needed = (la + lb + 2) / 3, i = 0, j = 0, shared = 0;
    while (shared < needed) {
        Py_ssize_t left = la - i < lb - j ? la - i : lb - j;
        if (shared + left < needed) return 0;
        uint64_t x = a[i], y = b[j];
        i += x <= y;
        j += y <= x;
        shared += x == y;
    }
    return 1;
}

typedef struct {
    Py_ssize_t cluster, count, order;
} Shared;

static int most_shared_first(const void *a, const void *b) {
    const Shared *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* -- clustering (motif_discovery.clusters_of) --------------------------------------------------------- */

static int cluster_runs(Call *call) {
    Shared *shared = NULL;
    Py_ssize_t shared_capacity = 0, *stamp_of, *slot_of;
    int result = -1;
    for (Py_ssize_t r = 0; r < call->n_runs; r++) {
        Run *run = &call->runs[r];
        Content *content = &call->contents[run->content];
        if (!content->seen) {
            content->n_postings = content->count < SKETCH ? content->count : SKETCH;
            for (Py_ssize_t k = 0; k < content->n_postings; k++) {
                Py_ssize_t posting = posting_of(call, call->pool[content->shingles + k]);
                if (posting < 0) goto done;
                content = &call->contents[run->content];
                content->postings[k] = posting;
            }
        } else if (content->joined >= 0) {
            Py_ssize_t filed = 0;
            for (Py_ssize_t k = 0; k < content->n_postings; k++) filed += call->postings[content->postings[k]].size;
            if (filed == content->filed) {
                if (vec_push(&call->clusters[content->joined].members, r) < 0) goto done;
                continue;
            }
        }
        /* the clusters filed under its sketch shingles, counted (the last MAX_POSTING of each posting) */
        stamp_of = call->stamp_of;
        slot_of = call->slot_of;
        Py_ssize_t n_shared = 0;
        for (Py_ssize_t k = 0; k < content->n_postings; k++) {
            Vec *posting = &call->postings[content->postings[k]];
            Py_ssize_t from = posting->size > MAX_POSTING ? posting->size - MAX_POSTING : 0;
            for (Py_ssize_t p = from; p < posting->size; p++) {
                Py_ssize_t c = posting->items[p];
                if (stamp_of[c] == r + 1) {
                    shared[slot_of[c]].count++;
                    continue;
                }
                if (grow((void **)&shared, &shared_capacity, n_shared + 1, sizeof(Shared)) < 0) goto done;
                stamp_of[c] = r + 1;
                slot_of[c] = n_shared;
                shared[n_shared] = (Shared){c, 1, n_shared};
                n_shared++;
            }
        }
        Py_ssize_t joined = -1;
        for (Py_ssize_t k = 0; k < n_shared && k < MAX_COMPARED; k++) {
            /* the k-th most shared (ties: first counted first), moved to position k */
            Py_ssize_t best = k;
            for (Py_ssize_t m = k + 1; m < n_shared; m++) {
                if (most_shared_first(&shared[m], &shared[best]) < 0) best = m;
            }
            Shared swap = shared[k];
            shared[k] = shared[best];
            shared[best] = swap;
            Cluster *cluster = &call->clusters[shared[k].cluster];
            if (similar(call->pool + cluster->shingles, cluster->count, call->pool + content->shingles,
                        content->count)) {
                joined = shared[k].cluster;
                break;
            }
        }
        Py_ssize_t filed = 0;
        if (joined < 0) {
            for (Py_ssize_t k = 0; k < content->n_postings; k++) {
                if (vec_push(&call->postings[content->postings[k]], call->n_clusters) < 0) goto done;
            }
        }
        for (Py_ssize_t k = 0; k < content->n_postings; k++) filed += call->postings[content->postings[k]].size;
        content->seen = 1;
        content->filed = filed;
        if (joined >= 0) {
            content->joined = joined;
            if (vec_push(&call->clusters[joined].members, r) < 0) goto done;
            continue;
        }
        /* founded: it rejoins this cluster while no posting grows, if it met every cluster it could */
        content->joined = n_shared < MAX_COMPARED ? call->n_clusters : -1;
        if (grow((void **)&call->clusters, &call->clusters_capacity, call->n_clusters + 1, sizeof(Cluster)) < 0)
            goto done;
        if (grow((void **)&call->stamp_of, &call->stamps_capacity, call->n_clusters + 1, sizeof(Py_ssize_t)) < 0 ||
            grow((void **)&call->slot_of, &call->slots_capacity, call->n_clusters + 1, sizeof(Py_ssize_t)) < 0)
            goto done;
        call->stamp_of[call->n_clusters] = 0;
        Cluster *cluster = &call->clusters[call->n_clusters++];
        memset(cluster, 0, sizeof(Cluster));
        cluster->shingles = content->shingles;
        cluster->count = content->count;
        if (vec_push(&cluster->members, r) < 0) goto done;
    }
    result = 0;
done:
    PyMem_Free(shared);
    return result;
}

/* -- candidates (motif_discovery.groups_of after clustering) ------------------------------------------ */

static int before(Run *a, Run *b) { /* (tokens, occurrence) of a < b's; -1 on error */
    if (a->tokens != b->tokens) return a->tokens < b->tokens;
    return PyObject_RichCompareBool(a->occurrence, b->occurrence, Py_LT);
}

static int emit(Call *call, Py_ssize_t *chosen, Py_ssize_t n, PyObject *found) {
    Py_ssize_t prototype = chosen[0];
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Run *run = &call->runs[chosen[i]];
        total += run->tokens;
        if (i == 0) continue;
        int is_before = before(run, &call->runs[prototype]);
        if (is_before < 0) return -1;
        if (is_before) prototype = chosen[i];
    }
    Run *first = &call->runs[prototype];
    long long gain = total - first->tokens - (long long)REFERENCE_TOKENS * n;
    if (gain <= 0) return 0;
    PyObject *occurrences = PyTuple_New(n);
    if (occurrences == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *occurrence = call->runs[chosen[i]].occurrence;
        Py_INCREF(occurrence);
        PyTuple_SET_ITEM(occurrences, i, occurrence);
    }
    PyObject *group = Py_BuildValue("(ONOLL)", call->runs[chosen[0]].ports, occurrences, first->occurrence,
                                    first->tokens, gain);
    if (group == NULL) return -1;
    int failed = PyList_Append(found, group);
    Py_DECREF(group);
    return failed;
}

static int candidates(Call *call, PyObject *found) {
    Py_ssize_t *seen_skill = PyMem_Calloc(call->n_skills + 1, sizeof(Py_ssize_t));
    Py_ssize_t *skill_slot = PyMem_Malloc((call->n_skills + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *ports_order = PyMem_Malloc((call->n_ports + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *ports_seen = PyMem_Calloc(call->n_ports + 1, sizeof(Py_ssize_t));
    Py_ssize_t *chosen = PyMem_Malloc((call->n_runs + 1) * sizeof(Py_ssize_t));
    Py_ssize_t stamp = 0;
    int result = -1;
    if (!seen_skill || !skill_slot || !ports_order || !ports_seen || !chosen) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t c = 0; c < call->n_clusters; c++) {
        Vec *members = &call->clusters[c].members;
        if (members->size < MIN_OCCURRENCES) continue;
        Py_ssize_t skills = 0, n_ports = 0;
        stamp++;
        for (Py_ssize_t m = 0; m < members->size; m++) {
            Run *run = &call->runs[members->items[m]];
            if (seen_skill[run->skill] != stamp) seen_skill[run->skill] = stamp, skills++;
            if (ports_seen[run->ports_id] != stamp) {
                ports_seen[run->ports_id] = stamp;
                ports_order[n_ports++] = run->ports_id;
            }
        }
        if (skills < MIN_OCCURRENCES) continue;
        for (Py_ssize_t g = 0; g < n_ports; g++) {
            /* each skill's first run of these ports, ordered by the skill's last run (as the reference's
             * dict over the reversed members gives them) */
            Py_ssize_t n = 0;
            stamp++;
            for (Py_ssize_t m = members->size - 1; m >= 0; m--) {
                Py_ssize_t r = members->items[m];
                Run *run = &call->runs[r];
                if (run->ports_id != ports_order[g]) continue;
                if (seen_skill[run->skill] != stamp) {
                    seen_skill[run->skill] = stamp;
                    skill_slot[run->skill] = n;
                    chosen[n++] = r;
                } else {
                    chosen[skill_slot[run->skill]] = r;
                }
            }
            if (n < MIN_OCCURRENCES) continue;
            for (Py_ssize_t i = 0; i < n / 2; i++) {
                Py_ssize_t swap = chosen[i];
                chosen[i] = chosen[n - 1 - i];
                chosen[n - 1 - i] = swap;
            }
            if (emit(call, chosen, n, found) < 0) goto done;
        }
    }
    result = 0;
done:
    PyMem_Free(seen_skill);
    PyMem_Free(skill_slot);
    PyMem_Free(ports_order);
    PyMem_Free(ports_seen);
    PyMem_Free(chosen);
    return result;
}

/* motif_discovery.may_gain */
static int may_gain(Call *call) {
    long long positive = 0, smallest = call->runs[0].tokens;
    for (Py_ssize_t r = 0; r < call->n_runs; r++) {
        long long size = call->runs[r].tokens;
        if (size > REFERENCE_TOKENS) positive += size - REFERENCE_TOKENS;
        if (size < smallest) smallest = size;
    }
    return positive > smallest;
}

/* -- the function ----------------------------------------------------------------------------------- */

/* The candidate groups among one bucket's runs (groups_of), the skills read through `known`. */
static PyObject *group_runs(Skills *known, PyObject *runs) {
    PyObject *found = NULL, *occurrence, *ports, *last_name = NULL;
    if (known->texts == NULL || known->busy) {
        PyErr_SetString(PyExc_RuntimeError, known->texts == NULL ? "the Grouper was cleared"
                                                                  : "the Grouper was called from inside its own call");
        return NULL;
    }
    known->busy = 1;
    Call call;
    memset(&call, 0, sizeof(Call));
    call.known = known;
    call.call = ++known->calls;
    call.n_runs = PyDict_GET_SIZE(runs);
    if (table_init(&call.content_table, call.n_runs) < 0 || table_init(&call.sketch_table, 4 * call.n_runs) < 0)
        goto done;
    call.runs = PyMem_Malloc((call.n_runs + 1) * sizeof(Run));
    if (call.runs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t last_skill = -1, position = 0;
    for (Py_ssize_t r = 0; PyDict_Next(runs, &position, &occurrence, &ports); r++) {
        call.runs[r].occurrence = occurrence; /* borrowed: the dict is not changed while the call runs */
        call.runs[r].ports = ports;
        __builtin_prefetch(occurrence); /* each is read once, far apart in memory: fetched ahead of the reads */
    }
    for (Py_ssize_t r = 0; r < call.n_runs; r++) {
        Run *run = &call.runs[r];
        if (read_run(&call, run, run->occurrence, run->ports, &last_skill, &last_name) < 0) goto done;
    }
    found = PyList_New(0);
    if (found == NULL || call.n_skills < MIN_OCCURRENCES || !may_gain(&call)) goto done;
    for (Py_ssize_t r = 0; r < call.n_runs; r++) {
        call.runs[r].content = content_of(&call, &call.runs[r]);
        if (call.runs[r].content < 0) goto failed;
    }
    if (cluster_runs(&call) < 0 || candidates(&call, found) < 0) goto failed;
    goto done;
failed:
    Py_CLEAR(found);
done:
    call_free(&call);
    known->busy = 0;
    return found;
}

static PyObject *groups(PyObject *module, PyObject *args) {
    PyObject *runs, *texts, *tokens;
    if (!PyArg_ParseTuple(args, "O!O!O!:groups", &PyDict_Type, &runs, &PyDict_Type, &texts, &PyDict_Type, &tokens))
        return NULL;
    Skills known;
    if (skills_init(&known, texts, tokens) < 0) return NULL;
    PyObject *found = group_runs(&known, runs);
    skills_free(&known);
    return found;
}

/* Grouper(texts, tokens)(runs) is groups(runs, texts, tokens), with each skill's text and token counts read
 * once for all its calls (a rebuild's buckets name the same skills again and again): the dicts, and what they
 * hold for the skills it has met, must not change while it is used. */
typedef struct {
    PyObject_HEAD
    Skills known;
} Grouper;

static PyObject *grouper_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *texts, *tokens;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs)) ||
        !PyArg_ParseTuple(args, "O!O!:Grouper", &PyDict_Type, &texts, &PyDict_Type, &tokens)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Grouper(texts, tokens) takes no keywords");
        return NULL;
    }
    Grouper *self = (Grouper *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    if (skills_init(&self->known, texts, tokens) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int grouper_traverse(PyObject *self, visitproc visit, void *arg) {
    Skills *known = &((Grouper *)self)->known;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(known->texts);
    Py_VISIT(known->tokens);
    for (Py_ssize_t i = 0; i < known->count; i++) {
        Skill *skill = &known->skills[i];
        Py_VISIT(skill->name);
        Py_VISIT(skill->tokens);
        Py_VISIT(skill->starts.obj);
        Py_VISIT(skill->words.obj);
        Py_VISIT(skill->trigrams.obj);
    }
    return 0;
}

static int grouper_clear(PyObject *self) {
    Skills *known = &((Grouper *)self)->known;
    if (!known->busy) skills_free(known); /* (a collection during a call leaves it for the dealloc) */
    return 0;
}

static void grouper_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    skills_free(&((Grouper *)self)->known);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *grouper_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *runs;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs)) || !PyArg_ParseTuple(args, "O!:Grouper", &PyDict_Type, &runs)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a Grouper takes no keywords");
        return NULL;
    }
    return group_runs(&((Grouper *)self)->known, runs);
}

static PyType_Slot grouper_slots[] = {
    {Py_tp_new, grouper_new},
    {Py_tp_dealloc, grouper_dealloc},
    {Py_tp_call, grouper_call},
    {Py_tp_traverse, grouper_traverse},
    {Py_tp_clear, grouper_clear},
    {Py_tp_doc, "Grouper(texts, tokens)(runs) -> groups(runs, texts, tokens), each skill read once for all calls"},
    {0, NULL},
};

static PyType_Spec grouper_spec = {"skillstate.server.skills._motifzip.Grouper", sizeof(Grouper), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, grouper_slots};

/* -- filing a skill's runs (motif_runs.file_runs_of) ------------------------------------------------- */

/* A tuple of items [start, stop) of a list (borrowed items, new references in the tuple). */
static PyObject *slice(PyObject *list, Py_ssize_t start, Py_ssize_t stop) {
    PyObject *tuple = PyTuple_New(stop - start);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = start; i < stop; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(tuple, i - start, item);
    }
    return tuple;
}

/* memo[items] if there, else method(items), which memoizes it (a new reference either way). */
static PyObject *memoized(PyObject *memo, PyObject *items, PyObject *owner, PyObject *method) {
    PyObject *found = PyDict_GetItemWithError(memo, items);
    if (found != NULL) {
        Py_INCREF(found);
        return found;
    }
    return PyErr_Occurred() ? NULL : PyObject_CallMethodOneArg(owner, method, items);
}

/* An instance of the Occurrence named tuple, made by tuple.__new__ as its own __new__ makes it, and left out of
 * the cyclic collector's reach: it holds a str and two ints, which make no cycle. (The collector untracks such
 * plain tuples itself, but never a tuple subclass's: a build's hundreds of thousands of occurrences would be
 * walked by every collection until the build ends.) */
static PyObject *occurrence_of(PyTypeObject *type, PyObject *skill, Py_ssize_t start, Py_ssize_t length) {
    PyObject *first = PyLong_FromSsize_t(start), *count = PyLong_FromSsize_t(length);
    PyObject *items = first && count ? PyTuple_Pack(3, skill, first, count) : NULL;
    Py_XDECREF(first);
    Py_XDECREF(count);
    PyObject *args = items ? PyTuple_Pack(1, items) : NULL;
    PyObject *made = args ? PyTuple_Type.tp_new(type, args, NULL) : NULL;
    Py_XDECREF(items);
    Py_XDECREF(args);
    if (made != NULL && PyObject_GC_IsTracked(made)) PyObject_GC_UnTrack(made);
    return made;
}

/* One (k, k + step, kind, label) of a key's pattern; NULL (no error) when the edge leaves the run. */
static PyObject *pattern_edge(Py_ssize_t k, PyObject *edge, Py_ssize_t length) {
    if (!PyTuple_Check(edge) || PyTuple_GET_SIZE(edge) != 3) {
        PyErr_SetString(PyExc_TypeError, "a row's edge must be (step, kind, label)");
        return NULL;
    }
    Py_ssize_t step = PyLong_AsSsize_t(PyTuple_GET_ITEM(edge, 0));
    if (step == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear(); /* an int beyond Py_ssize_t: far outside the run */
        return NULL;
    }
    if (step < -k || step >= length - k) return NULL;
    PyObject *from = PyLong_FromSsize_t(k), *to = PyLong_FromSsize_t(k + step);
    PyObject *made = from && to ? PyTuple_Pack(4, from, to, PyTuple_GET_ITEM(edge, 1), PyTuple_GET_ITEM(edge, 2)) : NULL;
    Py_XDECREF(from);
    Py_XDECREF(to);
    return made;
}

/* RunShapes._new_key: the key of a run of these row numbers (a tuple of ints), seen for the first time, appended
 * to `keys` and its number memoized under the run in `memo`. Returns the number (a new reference). */
static PyObject *new_key(PyObject *keys, PyObject *memo, PyObject *row_list, PyObject *run) {
    Py_ssize_t length = PyTuple_GET_SIZE(run);
    PyObject *signatures = PyTuple_New(length), *kinds = PyTuple_New(length), *pattern = PyList_New(0);
    PyObject *rows[MAX_RUN], *key = NULL, *number = NULL;
    Py_ssize_t held = 0;
    if (signatures == NULL || kinds == NULL || pattern == NULL) goto done;
    for (Py_ssize_t k = 0; k < length; k++) {
        Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(run, k));
        if (index == -1 && PyErr_Occurred()) goto done;
        if (index < 0 || index >= PyList_GET_SIZE(row_list)) {
            PyErr_Format(PyExc_IndexError, "row number %zd: there are %zd rows", index, PyList_GET_SIZE(row_list));
            goto done;
        }
        PyObject *row = PyList_GET_ITEM(row_list, index);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(row, 2))) {
            PyErr_SetString(PyExc_TypeError, "a row must be (signature, kinds, edges)");
            goto done;
        }
        rows[held++] = Py_NewRef(row); /* (a collection below may run finalizers that change the row list) */
        PyTuple_SET_ITEM(signatures, k, Py_NewRef(PyTuple_GET_ITEM(row, 0)));
        PyTuple_SET_ITEM(kinds, k, Py_NewRef(PyTuple_GET_ITEM(row, 1)));
    }
    for (Py_ssize_t k = 0; k < length; k++) {
        PyObject *near = PyTuple_GET_ITEM(rows[k], 2);
        for (Py_ssize_t e = 0; e < PyTuple_GET_SIZE(near); e++) {
            PyObject *edge = pattern_edge(k, PyTuple_GET_ITEM(near, e), length);
            if (edge == NULL && PyErr_Occurred()) goto done;
            if (edge != NULL) {
                int failed = PyList_Append(pattern, edge);
                Py_DECREF(edge);
                if (failed) goto done;
            }
        }
    }
    PyObject *edges = PyList_AsTuple(pattern);
    key = edges ? PyTuple_Pack(3, signatures, kinds, edges) : NULL;
    Py_XDECREF(edges);
    if (key == NULL || PyList_Append(keys, key) < 0) goto done;
    number = PyLong_FromSsize_t(PyList_GET_SIZE(keys) - 1);
    if (number != NULL && PyDict_SetItem(memo, run, number) < 0) Py_CLEAR(number);
done:
    for (Py_ssize_t k = 0; k < held; k++) Py_DECREF(rows[k]);
    Py_XDECREF(signatures);
    Py_XDECREF(kinds);
    Py_XDECREF(pattern);
    Py_XDECREF(key);
    return number;
}

static PyObject *new_ports_name, *keys_name, *key_list_name, *row_list_name, *ports_name;

static PyObject *file_runs(PyObject *module, PyObject *args) {
    PyObject *shapes, *skill, *rows, *reach, *files, *verifiable, *buckets, *grow;
    PyTypeObject *occurrence_type;
    if (!PyArg_ParseTuple(args, "OUO!O!O!OO!OO!:file_runs", &shapes, &skill, &PyList_Type, &rows, &PyList_Type,
                          &reach, &PyList_Type, &files, &verifiable, &PyList_Type, &buckets, &grow, &PyType_Type,
                          &occurrence_type))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(rows);
    if (PyList_GET_SIZE(reach) != count || PyList_GET_SIZE(files) != count ||
        (verifiable != Py_None && (!PyTuple_Check(verifiable) || PyTuple_GET_SIZE(verifiable) != count))) {
        PyErr_SetString(PyExc_ValueError, "rows, reach, files and verifiable must have one item a node");
        return NULL;
    }
    if (!PyType_IsSubtype(occurrence_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "occurrence must be a tuple type");
        return NULL;
    }
    PyObject *keys = PyObject_GetAttr(shapes, keys_name), *port_sets = PyObject_GetAttr(shapes, ports_name);
    PyObject *key_list = PyObject_GetAttr(shapes, key_list_name), *row_list = PyObject_GetAttr(shapes, row_list_name);
    if (keys == NULL || port_sets == NULL || key_list == NULL || row_list == NULL || !PyDict_Check(keys) ||
        !PyDict_Check(port_sets) || !PyList_Check(key_list) || !PyList_Check(row_list)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "shapes._keys and shapes._ports must be dicts, shapes.keys and shapes._row_list lists");
        Py_XDECREF(keys);
        Py_XDECREF(port_sets);
        Py_XDECREF(key_list);
        Py_XDECREF(row_list);
        return NULL;
    }
    PyObject *result = NULL;
    for (Py_ssize_t start = 1; start < count; start++) {
        Py_ssize_t last = start + MAX_RUN < count ? start + MAX_RUN : count;
        for (Py_ssize_t stop = start + 1; stop <= last; stop++) {
            if (PyList_GET_SIZE(rows) != count || PyList_GET_SIZE(reach) != count || PyList_GET_SIZE(files) != count) {
                PyErr_SetString(PyExc_RuntimeError, "rows, reach or files changed while their runs were filed");
                goto done;
            }
            PyObject *file = PyList_GET_ITEM(files, stop - 1), *first_file = PyList_GET_ITEM(files, start);
            if (file != first_file) {
                int same = PyObject_RichCompareBool(file, first_file, Py_EQ);
                if (same < 0) goto done;
                if (!same) break;
            }
            PyObject *run = slice(rows, start, stop);
            PyObject *key = run ? PyDict_GetItemWithError(keys, run) : NULL;
            if (key != NULL) Py_INCREF(key);
            else if (run != NULL && !PyErr_Occurred()) key = new_key(key_list, keys, row_list, run);
            Py_XDECREF(run);
            if (key == NULL) goto done;
            Py_ssize_t number = PyLong_AsSsize_t(key);
            Py_DECREF(key);
            if (number < 0) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a key number is never negative");
                goto done;
            }
            PyObject *spans = slice(reach, start, stop);
            PyObject *ports = spans ? memoized(port_sets, spans, shapes, new_ports_name) : NULL;
            Py_XDECREF(spans);
            if (ports == NULL) goto done;
            int held = 1;
            for (Py_ssize_t i = start; held == 1 && verifiable != Py_None && i < stop; i++)
                held = PyObject_IsTrue(PyTuple_GET_ITEM(verifiable, i));
            if (held == 1 && number >= PyList_GET_SIZE(buckets)) {
                PyObject *wanted = PyLong_FromSsize_t(number);
                PyObject *grown = wanted ? PyObject_CallOneArg(grow, wanted) : NULL;
                Py_XDECREF(wanted);
                Py_XDECREF(grown);
                if (grown == NULL) held = -1;
                else if (number >= PyList_GET_SIZE(buckets)) {
                    PyErr_SetString(PyExc_ValueError, "grow(key) left the buckets short of the key");
                    held = -1;
                }
            }
            if (held == 1) {
                PyObject *bucket = Py_NewRef(PyList_GET_ITEM(buckets, number));
                PyObject *occurrence = PyDict_Check(bucket) ? occurrence_of(occurrence_type, skill, start, stop - start)
                                                            : NULL;
                if (occurrence == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a bucket is a dict");
                held = occurrence == NULL ? -1 : PyDict_SetItem(bucket, occurrence, ports);
                Py_XDECREF(occurrence);
                Py_DECREF(bucket);
            }
            Py_DECREF(ports);
            if (held < 0) goto done;
        }
    }
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(keys);
    Py_DECREF(port_sets);
    Py_DECREF(key_list);
    Py_DECREF(row_list);
    return result;
}

/* -- a skill's words as hashed 3-grams (motif_discovery.shingled_in_python) ------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void) { /* CRC-32 as zlib computes it (reflected, polynomial 0xEDB88320) */
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_of(const char *bytes, Py_ssize_t size) {
    uint32_t c = 0xFFFFFFFFU;
    for (Py_ssize_t i = 0; i < size; i++) c = crc_table[(c ^ (unsigned char)bytes[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFU;
}

static PyObject *array_type;

static PyObject *array_of(const char *code, const void *items, Py_ssize_t size) {
    return PyObject_CallFunction(array_type, "sy#", code, (const char *)items, size);
}

static PyObject *shingled(PyObject *module, PyObject *node_terms) {
    PyObject *nodes = PySequence_Fast(node_terms, "node_terms must be a sequence of sequences of str");
    if (nodes == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(nodes), total = 0, written = 0;
    uint32_t *starts = PyMem_Malloc((count + 1) * sizeof(uint32_t)), *words = NULL;
    uint64_t *trigrams = NULL;
    PyObject *result = NULL, **node_words = PyMem_Calloc(count + 1, sizeof(PyObject *));
    if (starts == NULL || node_words == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        node_words[n] = PySequence_Fast(PySequence_Fast_GET_ITEM(nodes, n), "a node's terms must be a sequence of str");
        if (node_words[n] == NULL) goto done;
        total += PySequence_Fast_GET_SIZE(node_words[n]);
    }
    if (total > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a skill of more than 2**32 words");
        goto done;
    }
    words = PyMem_Malloc((total + 1) * sizeof(uint32_t));
    trigrams = PyMem_Malloc((total + 1) * sizeof(uint64_t));
    if (words == NULL || trigrams == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    starts[0] = 0;
    for (Py_ssize_t n = 0; n < count; n++) {
        Py_ssize_t size = PySequence_Fast_GET_SIZE(node_words[n]);
        PyObject **items = PySequence_Fast_ITEMS(node_words[n]);
        for (Py_ssize_t i = 0; i < size; i++) {
            Py_ssize_t length;
            const char *text = PyUnicode_Check(items[i]) ? PyUnicode_AsUTF8AndSize(items[i], &length) : NULL;
            if (text == NULL) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a term must be a str");
                goto done;
            }
            words[written++] = crc32_of(text, length);
        }
        starts[n + 1] = (uint32_t)written;
    }
    Py_ssize_t shingles = total >= 3 ? total - 2 : 0;
    for (Py_ssize_t i = 0; i < shingles; i++) /* motif_discovery._combine of the 3 words */
        trigrams[i] = ((3 * PRIME ^ words[i]) * PRIME ^ words[i + 1]) * PRIME ^ words[i + 2];
    PyObject *made[3] = {array_of("I", starts, (count + 1) * 4), array_of("I", words, total * 4),
                         array_of("Q", trigrams, shingles * 8)};
    if (made[0] && made[1] && made[2]) {
        result = PyTuple_Pack(3, made[0], made[1], made[2]);
    }
    for (int k = 0; k < 3; k++) Py_XDECREF(made[k]);
done:
    if (node_words != NULL) {
        for (Py_ssize_t n = 0; n < count; n++) Py_XDECREF(node_words[n]);
    }
    PyMem_Free(node_words);
    PyMem_Free(starts);
    PyMem_Free(words);
    PyMem_Free(trigrams);
    Py_DECREF(nodes);
    return result;
}

/* -- the greedy choice of a rebuild (macro_index.chosen_in_python) -------------------------------------- */

typedef struct {
    PyObject *name; /* borrowed from an occurrence */
    uint64_t *bits; /* the skill's nodes taken */
    Py_ssize_t words;
} Claimed;

typedef struct {
    Claimed *skills;
    Py_ssize_t count, capacity;
    Table table;
} Claims;

typedef struct {
    Claims *claims;
    PyObject *name;
    int error;
} ClaimKey;

static int same_claimed(void *context, Py_ssize_t value) {
    ClaimKey *key = context;
    return same_name(key->claims->skills[value].name, key->name, &key->error);
}

/* The claims of a skill, made (with no node taken) if `make`; NULL (and no error) if not made. */
static Claimed *claimed_of(Claims *claims, PyObject *name, int make) {
    Py_hash_t hash = PyObject_Hash(name);
    if (hash == -1) return NULL;
    ClaimKey key = {claims, name, 0};
    Py_ssize_t slot = table_find(&claims->table, (uint64_t)hash, same_claimed, &key);
    if (key.error) return NULL;
    if (claims->table.values[slot] >= 0) return &claims->skills[claims->table.values[slot]];
    if (!make) return NULL;
    if (grow((void **)&claims->skills, &claims->capacity, claims->count + 1, sizeof(Claimed)) < 0) return NULL;
    Claimed *made = &claims->skills[claims->count];
    *made = (Claimed){name, NULL, 0};
    if (table_put(&claims->table, slot, (uint64_t)hash, claims->count++) < 0) return NULL;
    return made;
}

/* An occurrence's skill, start and length, checked. */
static int read_occurrence(PyObject *occurrence, PyObject **name, Py_ssize_t *start, Py_ssize_t *length) {
    if (!PyTuple_Check(occurrence) || PyTuple_GET_SIZE(occurrence) != 3) {
        PyErr_SetString(PyExc_TypeError, "an occurrence must be an Occurrence (skill, start, length)");
        return -1;
    }
    *name = PyTuple_GET_ITEM(occurrence, 0);
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(occurrence, 1));
    *length = PyLong_AsSsize_t(PyTuple_GET_ITEM(occurrence, 2));
    if (PyErr_Occurred()) return -1;
    if (*start < 0 || *length < 1) {
        PyErr_Format(PyExc_ValueError, "occurrence %R has no nodes", occurrence);
        return -1;
    }
    return 0;
}

/* Whether any node of [start, start + length) is taken. */
static int any_taken(const Claimed *skill, Py_ssize_t start, Py_ssize_t length) {
    for (Py_ssize_t i = start; skill != NULL && i < start + length; i++) {
        if (i / 64 < skill->words && skill->bits[i / 64] >> (i % 64) & 1) return 1;
    }
    return 0;
}

static int take(Claimed *skill, Py_ssize_t start, Py_ssize_t length) {
    Py_ssize_t needed = (start + length + 63) / 64;
    if (needed > skill->words) {
        uint64_t *bits = PyMem_Realloc(skill->bits, needed * sizeof(uint64_t));
        if (bits == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(bits + skill->words, 0, (needed - skill->words) * sizeof(uint64_t));
        skill->bits = bits;
        skill->words = needed;
    }
    for (Py_ssize_t i = start; i < start + length; i++) skill->bits[i / 64] |= (uint64_t)1 << (i % 64);
    return 0;
}

/* The tokens of an occurrence's nodes (macro_index._gain's sizes). */
static int tokens_of(PyObject *tokens, PyObject *name, Py_ssize_t start, Py_ssize_t length, long long *sum) {
    PyObject *sizes = PyDict_GetItemWithError(tokens, name);
    if (sizes == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
        return -1;
    }
    if (!PyTuple_Check(sizes) || start + length > PyTuple_GET_SIZE(sizes)) {
        PyErr_SetString(PyExc_ValueError, "an occurrence lies outside its skill's token counts");
        return -1;
    }
    *sum = 0;
    for (Py_ssize_t i = start; i < start + length; i++) {
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, i));
        if (size == -1 && PyErr_Occurred()) return -1;
        *sum += size;
    }
    return 0;
}

static PyObject *chosen(PyObject *module, PyObject *args) {
    PyObject *candidates, *tokens, *taken = NULL;
    if (!PyArg_ParseTuple(args, "O!O!:chosen", &PyList_Type, &candidates, &PyDict_Type, &tokens)) return NULL;
    Claims claims = {NULL, 0, 0, {NULL, NULL, 0, 0}};
    Py_ssize_t *free_ones = NULL, free_capacity = 0;
    if (table_init(&claims.table, 1024) < 0) return NULL;
    taken = PyList_New(0);
    if (taken == NULL) goto failed;
    for (Py_ssize_t position = 0; position < PyList_GET_SIZE(candidates); position++) {
        PyObject *candidate = PyList_GET_ITEM(candidates, position), *group, *found;
        if (!PyTuple_Check(candidate) || PyTuple_GET_SIZE(candidate) != 4 ||
            !PyTuple_Check(group = PyTuple_GET_ITEM(candidate, 3)) || PyTuple_GET_SIZE(group) != 5 ||
            !PyTuple_Check(found = PyTuple_GET_ITEM(group, 1))) {
            PyErr_SetString(PyExc_TypeError, "a candidate must be (-gain, prototype, key, group)");
            goto failed;
        }
        Py_ssize_t count = PyTuple_GET_SIZE(found), free_count = 0;
        if (grow((void **)&free_ones, &free_capacity, count + 1, sizeof(Py_ssize_t)) < 0) goto failed;
        for (Py_ssize_t k = 0; k < count; k++) {
            PyObject *name;
            Py_ssize_t start, length;
            if (read_occurrence(PyTuple_GET_ITEM(found, k), &name, &start, &length) < 0) goto failed;
            Claimed *skill = claimed_of(&claims, name, 0);
            if (skill == NULL && PyErr_Occurred()) goto failed;
            if (!any_taken(skill, start, length)) free_ones[free_count++] = k;
        }
        if (free_count < MIN_OCCURRENCES) continue;
        PyObject *occurrences;
        if (free_count == count) {
            occurrences = Py_NewRef(found);
        } else { /* macro_index._gain of the free ones */
            long long total = 0, smallest = 0;
            for (Py_ssize_t k = 0; k < free_count; k++) {
                PyObject *name;
                Py_ssize_t start, length;
                long long size;
                if (read_occurrence(PyTuple_GET_ITEM(found, free_ones[k]), &name, &start, &length) < 0 ||
                    tokens_of(tokens, name, start, length, &size) < 0)
                    goto failed;
                total += size;
                smallest = k == 0 || size < smallest ? size : smallest;
            }
            if (total - smallest - (long long)REFERENCE_TOKENS * free_count <= 0) continue;
            occurrences = PyTuple_New(free_count);
            if (occurrences == NULL) goto failed;
            for (Py_ssize_t k = 0; k < free_count; k++)
                PyTuple_SET_ITEM(occurrences, k, Py_NewRef(PyTuple_GET_ITEM(found, free_ones[k])));
        }
        PyObject *entry = Py_BuildValue("(nN)", position, occurrences);
        if (entry == NULL || PyList_Append(taken, entry) < 0) {
            Py_XDECREF(entry);
            goto failed;
        }
        Py_DECREF(entry);
        for (Py_ssize_t k = 0; k < free_count; k++) {
            PyObject *name;
            Py_ssize_t start, length;
            if (read_occurrence(PyTuple_GET_ITEM(found, free_ones[k]), &name, &start, &length) < 0) goto failed;
            Claimed *skill = claimed_of(&claims, name, 1);
            if (skill == NULL || take(skill, start, length) < 0) goto failed;
        }
    }
    goto done;
failed:
    Py_CLEAR(taken);
done:
    for (Py_ssize_t i = 0; i < claims.count; i++) PyMem_Free(claims.skills[i].bits);
    PyMem_Free(claims.skills);
    table_free(&claims.table);
    PyMem_Free(free_ones);
    return taken;
}

static PyMethodDef methods[] = {
    {"groups", groups, METH_VARARGS,
     "groups(runs, texts, tokens) -> [(ports, occurrences, prototype, prototype_tokens, gain)]: "
     "motif_discovery.groups_of in C."},
    {"file_runs", file_runs, METH_VARARGS,
     "file_runs(shapes, skill, rows, reach, files, verifiable, buckets, grow, occurrence): "
     "motif_runs.file_runs_of in C."},
    {"chosen", chosen, METH_VARARGS,
     "chosen(candidates, tokens) -> [(position, occurrences)]: macro_index.chosen_in_python in C."},
    {"shingled", shingled, METH_O,
     "shingled(node_terms) -> (starts, words, trigrams): motif_discovery.shingled_in_python in C."},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *module) {
    crc_init();
    PyObject *arrays = PyImport_ImportModule("array");
    if (arrays == NULL) return -1;
    array_type = PyObject_GetAttrString(arrays, "array");
    Py_DECREF(arrays);
    new_ports_name = PyUnicode_InternFromString("_new_ports");
    keys_name = PyUnicode_InternFromString("_keys");
    key_list_name = PyUnicode_InternFromString("keys");
    row_list_name = PyUnicode_InternFromString("_row_list");
    ports_name = PyUnicode_InternFromString("_ports");
    starts_name = PyUnicode_InternFromString("starts");
    words_name = PyUnicode_InternFromString("words");
    trigrams_name = PyUnicode_InternFromString("trigrams");
    if (array_type == NULL || !new_ports_name || !keys_name || !key_list_name || !row_list_name || !ports_name ||
        !starts_name ||
        !words_name || !trigrams_name)
        return -1;
    PyObject *grouper = PyType_FromSpec(&grouper_spec);
    if (grouper == NULL) return -1;
    int added = PyModule_AddObjectRef(module, "Grouper", grouper);
    Py_DECREF(grouper);
    if (added < 0) return -1;
    if (PyModule_AddIntConstant(module, "VERSION", VERSION) < 0 ||
        PyModule_AddIntConstant(module, "MAX_RUN", MAX_RUN) < 0 ||
        PyModule_AddIntConstant(module, "SKETCH", SKETCH) < 0 ||
        PyModule_AddIntConstant(module, "MAX_COMPARED", MAX_COMPARED) < 0 ||
        PyModule_AddIntConstant(module, "MAX_POSTING", MAX_POSTING) < 0 ||
        PyModule_AddIntConstant(module, "MIN_OCCURRENCES", MIN_OCCURRENCES) < 0 ||
        PyModule_AddIntConstant(module, "REFERENCE_TOKENS", REFERENCE_TOKENS) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_motifzip", "MotifZip's hot loops in C, with motif_discovery's Python as their reference.",
    0, methods, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__motifzip(void) { return PyModuleDef_Init(&definition); }
