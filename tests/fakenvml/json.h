/* A small JSON reader for the fake NVML's scenario files.
 *
 * Recursive descent over the whole text; produces a tree of jnode. Strict enough to reject
 * malformed input with a message naming line and column, lenient about nothing else.
 */
#ifndef FAKENVML_JSON_H
#define FAKENVML_JSON_H

#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } jtype;

typedef struct jnode {
    jtype type;
    int boolean;          /* J_BOOL */
    double number;        /* J_NUMBER */
    long long integer;    /* J_NUMBER: exact value when is_integer */
    int is_integer;
    char *string;         /* J_STRING (NUL-terminated UTF-8) */
    size_t length;        /* items in an array or object */
    struct jnode **items; /* J_ARRAY and J_OBJECT values */
    char **keys;          /* J_OBJECT keys, parallel to items */
} jnode;

/* Parses text; on failure returns NULL and writes a message into error (size error_size). */
jnode *json_parse(const char *text, char *error, size_t error_size);
void json_free(jnode *node);

/* Lookups; each returns NULL / 0 when the key is absent, null or of another type. */
const jnode *json_get(const jnode *object, const char *key);
int json_get_integer(const jnode *object, const char *key, long long *out);
int json_get_number(const jnode *object, const char *key, double *out);
int json_get_bool(const jnode *object, const char *key, int *out);
const char *json_get_string(const jnode *object, const char *key);
/* 1 when object[key] is an array of strings containing value. */
int json_list_contains(const jnode *object, const char *key, const char *value);
/* 1 when object[key] is an array of numbers containing value. */
int json_list_contains_integer(const jnode *object, const char *key, long long value);

#endif
