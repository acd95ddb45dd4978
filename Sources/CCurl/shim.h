#ifndef CAIRN_CCURL_SHIM_H
#define CAIRN_CCURL_SHIM_H

/* The type-checking macros of <curl/typecheck-gcc.h> wrap curl_easy_setopt in a statement
   expression; the shims below pass correctly typed arguments, so they are not needed. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one shim per
   argument type (libcurl's documentation names the type of every option). */

static inline CURLcode cairn_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode cairn_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
/* CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION. */
static inline CURLcode cairn_curl_setopt_write_callback(CURL *handle, CURLoption option,
                                                        curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}
/* CURLOPT_XFERINFOFUNCTION. */
static inline CURLcode cairn_curl_setopt_xferinfo_callback(CURL *handle, CURLoption option,
                                                           curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode cairn_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode cairn_curl_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode cairn_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/* CURL_GLOBAL_DEFAULT is a macro over an or of macros. */
static inline CURLcode cairn_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* CURL_ERROR_SIZE: the size of the buffer CURLOPT_ERRORBUFFER writes into. */
static inline int cairn_curl_error_size(void) { return CURL_ERROR_SIZE; }

#endif
