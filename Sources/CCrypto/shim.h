#ifndef CAIRN_CCRYPTO_SHIM_H
#define CAIRN_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/sha.h>
#endif
