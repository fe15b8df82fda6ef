/* Host-side decompression of a bzImage payload and loading of the vmlinux
 * ELF it holds. Every size comes from the file and is checked. */
#include <elf.h>
#include <errno.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "arch/x86/layout.h"
#include "arch/x86/vmlinux.h"

#define fail(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

static int unxz(const uint8_t *in, size_t inlen, uint8_t *out, size_t outlen)
{
	uint64_t memlimit = 256u << 20;
	size_t inpos = 0, outpos = 0;
	lzma_ret r;

	r = lzma_stream_buffer_decode(&memlimit, 0, NULL, in, &inpos, inlen, out,
				      &outpos, outlen);
	return r == LZMA_OK && outpos == outlen ? 0 : -EINVAL;
}

static int gunzip(const uint8_t *in, size_t inlen, uint8_t *out, size_t outlen)
{
	z_stream z = { 0 };
	int r;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)in;
	z.avail_in = inlen > UINT32_MAX ? UINT32_MAX : inlen;
	z.next_out = out;
	z.avail_out = outlen;
	r = inflate(&z, Z_FINISH);
	inflateEnd(&z);
	return r == Z_STREAM_END && z.total_out == outlen ? 0 : -EINVAL;
}

static int unzstd(const uint8_t *in, size_t inlen, uint8_t *out, size_t outlen)
{
	size_t r = ZSTD_decompress(out, outlen, in, inlen);

	return !ZSTD_isError(r) && r == outlen ? 0 : -EINVAL;
}

int vmlinux_extract(const uint8_t *img, size_t len, const struct bzimage_info *bi,
		    uint8_t *scratch, size_t scratch_len, uint8_t **out,
		    size_t *outlen, char *err, size_t errlen)
{
	int (*decode)(const uint8_t *in, size_t inlen, uint8_t *out, size_t outlen);
	const uint8_t *p;
	size_t plen, size;
	uint8_t *buf;

	if (!bi->payload_length || bi->payload_offset > bi->kernel_size ||
	    bi->payload_length > bi->kernel_size - bi->payload_offset ||
	    bi->payload_length < 16)
		return -ENOTSUP;
	p = img + bi->kernel_off + bi->payload_offset;
	plen = bi->payload_length;
	/* The kernel build appends the decompressed size (le32). */
	size = p[plen - 4] | p[plen - 3] << 8 | p[plen - 2] << 16 | (size_t)p[plen - 1] << 24;
	if (size < sizeof(Elf64_Ehdr) || size > VMLINUX_MAX_SIZE)
		return fail("bzImage payload claims %zu bytes decompressed", size);
	if (!memcmp(p, "\xfd" "7zXZ", 6)) {
		plen -= 4;	/* xz wants exactly the stream */
		decode = unxz;
	} else if (!memcmp(p, "\x28\xb5\x2f\xfd", 4)) {
		plen -= 4;	/* zstd wants exactly the frame */
		decode = unzstd;
	} else if (p[0] == 0x1f && p[1] == 0x8b) {
		decode = gunzip;
	} else {
		return -ENOTSUP;
	}
	buf = scratch && size <= scratch_len ? scratch : malloc(size);
	if (!buf)
		return -ENOMEM;
	if (decode(p, plen, buf, size)) {
		if (buf != scratch)
			free(buf);
		return fail("corrupt bzImage: its compressed kernel does not decompress");
	}
	*out = buf;
	*outlen = size;
	return 0;
}

int vmlinux_parse(const uint8_t *elf, size_t len, uint64_t low_ram_end,
		  struct vmlinux_image *vi, char *err, size_t errlen)
{
	Elf64_Ehdr eh;
	int entry_ok = 0;

	memset(vi, 0, sizeof(*vi));
	if (len < sizeof(eh))
		return fail("bzImage payload is not an ELF file");
	memcpy(&eh, elf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
	    eh.e_type != ET_EXEC)
		return fail("bzImage payload is not an x86-64 ELF executable");
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
	    (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff)
		return fail("bzImage payload has bad program headers");
	vi->start = UINT64_MAX;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		struct vmlinux_segment *s;

		memcpy(&ph, elf + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_offset > len ||
		    ph.p_filesz > len - ph.p_offset)
			return fail("bzImage payload segment %u lies outside the file", i);
		if (ph.p_paddr < HIGH_MEMORY || ph.p_paddr > low_ram_end ||
		    ph.p_memsz > low_ram_end - ph.p_paddr)
			return fail("the kernel needs RAM up to 0x%llx; --memory is too small",
				    (unsigned long long)(ph.p_paddr + ph.p_memsz));
		if (vi->nseg >= VMLINUX_MAX_SEGMENTS)
			return fail("bzImage payload has too many segments");
		s = &vi->seg[vi->nseg++];
		*s = (struct vmlinux_segment){ ph.p_offset, ph.p_filesz, ph.p_paddr, ph.p_memsz };
		if (s->paddr < vi->start)
			vi->start = s->paddr;
		if (s->paddr + s->memsz > vi->end)
			vi->end = s->paddr + s->memsz;
		if (eh.e_entry >= s->paddr && eh.e_entry - s->paddr < s->memsz)
			entry_ok = 1;
	}
	if (!vi->nseg || !entry_ok)
		return fail("bzImage payload has no loadable segment holding its entry point");
	vi->entry = eh.e_entry;
	return 0;
}

int vmlinux_load(struct gmem *m, const uint8_t *elf, const struct vmlinux_image *vi)
{
	for (unsigned int i = 0; i < vi->nseg; i++) {
		const struct vmlinux_segment *s = &vi->seg[i];
		uint8_t *dst = gmem_ptr(m, s->paddr, s->memsz);

		if (!dst)
			return -EINVAL;
		memcpy(dst, elf + s->file_off, s->filesz);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
	return 0;
}
