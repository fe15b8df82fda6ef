/* x86 primitives usable at CPL 3 (IOPL 3) and CPL 0: port I/O, MMIO, TSC,
 * CPUID, barriers. Nothing here uses SSE/x87 or instructions PVM rejects. */
#ifndef PROBE_ARCH_H
#define PROBE_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint16_t inw(uint16_t port)
{
	uint16_t v;

	__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;

	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t *a, uint32_t *b,
			 uint32_t *c, uint32_t *d)
{
	__asm__ volatile("cpuid"
			 : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
			 : "a"(leaf), "c"(sub));
}

static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

/* Compiler barrier: enough on x86 between stores, or between loads. */
static inline void barrier(void)
{
	__asm__ volatile("" ::: "memory");
}

/* Full barrier (store -> load ordering), without SSE2's mfence. */
static inline void mb(void)
{
	__asm__ volatile("lock addl $0, (%%rsp)" ::: "memory", "cc");
}

static inline uint8_t mmio_read8(const volatile void *p)
{
	return *(const volatile uint8_t *)p;
}

static inline uint16_t mmio_read16(const volatile void *p)
{
	return *(const volatile uint16_t *)p;
}

static inline uint32_t mmio_read32(const volatile void *p)
{
	return *(const volatile uint32_t *)p;
}

static inline void mmio_write8(volatile void *p, uint8_t v)
{
	*(volatile uint8_t *)p = v;
}

static inline void mmio_write16(volatile void *p, uint16_t v)
{
	*(volatile uint16_t *)p = v;
}

static inline void mmio_write32(volatile void *p, uint32_t v)
{
	*(volatile uint32_t *)p = v;
}

/* A pointer to physical (= virtual) address a. Laundered through asm so the
 * compiler does not reason about small constant addresses. */
static inline void *phys_ptr(uint64_t a)
{
	void *p = (void *)(uintptr_t)a;

	__asm__("" : "+r"(p));
	return p;
}

/* 64-bit registers as two 32-bit accesses, low half first (virtio allows
 * this, and it keeps device models simple). */
static inline void mmio_write64(volatile void *p, uint64_t v)
{
	mmio_write32(p, (uint32_t)v);
	mmio_write32((volatile uint8_t *)p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t mmio_read64(const volatile void *p)
{
	uint64_t lo = mmio_read32(p);

	return lo | ((uint64_t)mmio_read32((const volatile uint8_t *)p + 4) << 32);
}

#endif
