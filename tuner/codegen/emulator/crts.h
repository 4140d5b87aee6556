/*
 * crts.h - swemu stand-in for the SW26010-Pro CRTS header.  The CRTS_* names
 * the emulator supports are defined in slave.h (CPE side) and athread.h
 * (MPE side); compile CPE files with -D__sw_slave__ to get the slave side.
 */
#ifndef SWEMU_CRTS_H
#define SWEMU_CRTS_H
#if defined(__sw_slave__)
#include "slave.h"
#else
#include "athread.h"
#endif
#endif
