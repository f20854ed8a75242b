/* archive_lazy.h - libarchive, loaded only when an archive is made or read.
 *
 * libarchive links libxml2, ICU (30 MB of tables) and libstdc++: mapping
 * them costs every pisb-create, pisb-fs and controller start milliseconds
 * and megabytes of RSS, though only image imports and push/pull use it.
 * So no binary links it; the first archive_* call dlopen()s it.  Include
 * this after <archive.h> and <archive_entry.h>.  Call pisb_archive_load()
 * before the first use to get an error instead of an exit if it is missing.
 */
#ifndef PISB_ARCHIVE_LAZY_H
#define PISB_ARCHIVE_LAZY_H

#include <archive.h>
#include <archive_entry.h>

#define PISB_ARCHIVE_FUNCS(X) \
	X(archive_error_string) X(archive_set_error) \
	X(archive_read_new) X(archive_read_free) X(archive_read_support_filter_all) \
	X(archive_read_support_format_all) X(archive_read_support_format_tar) \
	X(archive_read_open) X(archive_read_open_filename) X(archive_read_open_fd) \
	X(archive_read_next_header) X(archive_read_data_block) \
	X(archive_write_new) X(archive_write_free) X(archive_write_open) \
	X(archive_write_close) X(archive_write_header) X(archive_write_data) \
	X(archive_write_data_block) X(archive_write_finish_entry) \
	X(archive_write_set_format_pax_restricted) X(archive_write_set_bytes_per_block) \
	X(archive_write_disk_new) X(archive_write_disk_set_options) \
	X(archive_write_disk_set_standard_lookup) \
	X(archive_entry_new) X(archive_entry_free) X(archive_entry_pathname) \
	X(archive_entry_set_pathname) X(archive_entry_hardlink) X(archive_entry_symlink) \
	X(archive_entry_set_symlink) X(archive_entry_filetype) X(archive_entry_set_filetype) \
	X(archive_entry_perm) X(archive_entry_set_perm) X(archive_entry_size) \
	X(archive_entry_set_size) X(archive_entry_set_mtime) X(archive_entry_uid) \
	X(archive_entry_gid) X(archive_entry_set_uid) X(archive_entry_set_gid) \
	X(archive_entry_set_uname) X(archive_entry_set_gname) \
	X(archive_entry_sparse_add_entry) X(archive_entry_sparse_count)


struct pisb_archive_api {
#define PISB_ARCHIVE_FIELD(f) __typeof__(f) *f;
	PISB_ARCHIVE_FUNCS(PISB_ARCHIVE_FIELD)
#undef PISB_ARCHIVE_FIELD
};

struct pisb_err;

/* Load it now: 0, or -1 with e (code 1) naming what is missing.  Callers
 * that can report an error do this first; pisb_archive() (behind every
 * archive_* call) ends the process if loading fails. */
int pisb_archive_load(struct pisb_err *e);
const struct pisb_archive_api *pisb_archive(void);

#ifndef PISB_ARCHIVE_LAZY_IMPL
#define archive_entry_sparse_add_entry(...) (pisb_archive()->archive_entry_sparse_add_entry(__VA_ARGS__))
#define archive_entry_sparse_count(...) (pisb_archive()->archive_entry_sparse_count(__VA_ARGS__))
#define archive_error_string(...) (pisb_archive()->archive_error_string(__VA_ARGS__))
#define archive_set_error(...) (pisb_archive()->archive_set_error(__VA_ARGS__))
#define archive_read_new(...) (pisb_archive()->archive_read_new(__VA_ARGS__))
#define archive_read_free(...) (pisb_archive()->archive_read_free(__VA_ARGS__))
#define archive_read_support_filter_all(...) (pisb_archive()->archive_read_support_filter_all(__VA_ARGS__))
#define archive_read_support_format_all(...) (pisb_archive()->archive_read_support_format_all(__VA_ARGS__))
#define archive_read_support_format_tar(...) (pisb_archive()->archive_read_support_format_tar(__VA_ARGS__))
#define archive_read_open(...) (pisb_archive()->archive_read_open(__VA_ARGS__))
#define archive_read_open_filename(...) (pisb_archive()->archive_read_open_filename(__VA_ARGS__))
#define archive_read_open_fd(...) (pisb_archive()->archive_read_open_fd(__VA_ARGS__))
#define archive_read_next_header(...) (pisb_archive()->archive_read_next_header(__VA_ARGS__))
#define archive_read_data_block(...) (pisb_archive()->archive_read_data_block(__VA_ARGS__))
#define archive_write_new(...) (pisb_archive()->archive_write_new(__VA_ARGS__))
#define archive_write_free(...) (pisb_archive()->archive_write_free(__VA_ARGS__))
#define archive_write_open(...) (pisb_archive()->archive_write_open(__VA_ARGS__))
#define archive_write_close(...) (pisb_archive()->archive_write_close(__VA_ARGS__))
#define archive_write_header(...) (pisb_archive()->archive_write_header(__VA_ARGS__))
#define archive_write_data(...) (pisb_archive()->archive_write_data(__VA_ARGS__))
#define archive_write_data_block(...) (pisb_archive()->archive_write_data_block(__VA_ARGS__))
#define archive_write_finish_entry(...) (pisb_archive()->archive_write_finish_entry(__VA_ARGS__))
#define archive_write_set_format_pax_restricted(...) (pisb_archive()->archive_write_set_format_pax_restricted(__VA_ARGS__))
#define archive_write_set_bytes_per_block(...) (pisb_archive()->archive_write_set_bytes_per_block(__VA_ARGS__))
#define archive_write_disk_new(...) (pisb_archive()->archive_write_disk_new(__VA_ARGS__))
#define archive_write_disk_set_options(...) (pisb_archive()->archive_write_disk_set_options(__VA_ARGS__))
#define archive_write_disk_set_standard_lookup(...) (pisb_archive()->archive_write_disk_set_standard_lookup(__VA_ARGS__))
#define archive_entry_new(...) (pisb_archive()->archive_entry_new(__VA_ARGS__))
#define archive_entry_free(...) (pisb_archive()->archive_entry_free(__VA_ARGS__))
#define archive_entry_pathname(...) (pisb_archive()->archive_entry_pathname(__VA_ARGS__))
#define archive_entry_set_pathname(...) (pisb_archive()->archive_entry_set_pathname(__VA_ARGS__))
#define archive_entry_hardlink(...) (pisb_archive()->archive_entry_hardlink(__VA_ARGS__))
#define archive_entry_symlink(...) (pisb_archive()->archive_entry_symlink(__VA_ARGS__))
#define archive_entry_set_symlink(...) (pisb_archive()->archive_entry_set_symlink(__VA_ARGS__))
#define archive_entry_filetype(...) (pisb_archive()->archive_entry_filetype(__VA_ARGS__))
#define archive_entry_set_filetype(...) (pisb_archive()->archive_entry_set_filetype(__VA_ARGS__))
#define archive_entry_perm(...) (pisb_archive()->archive_entry_perm(__VA_ARGS__))
#define archive_entry_set_perm(...) (pisb_archive()->archive_entry_set_perm(__VA_ARGS__))
#define archive_entry_size(...) (pisb_archive()->archive_entry_size(__VA_ARGS__))
#define archive_entry_set_size(...) (pisb_archive()->archive_entry_set_size(__VA_ARGS__))
#define archive_entry_set_mtime(...) (pisb_archive()->archive_entry_set_mtime(__VA_ARGS__))
#define archive_entry_uid(...) (pisb_archive()->archive_entry_uid(__VA_ARGS__))
#define archive_entry_gid(...) (pisb_archive()->archive_entry_gid(__VA_ARGS__))
#define archive_entry_set_uid(...) (pisb_archive()->archive_entry_set_uid(__VA_ARGS__))
#define archive_entry_set_gid(...) (pisb_archive()->archive_entry_set_gid(__VA_ARGS__))
#define archive_entry_set_uname(...) (pisb_archive()->archive_entry_set_uname(__VA_ARGS__))
#define archive_entry_set_gname(...) (pisb_archive()->archive_entry_set_gname(__VA_ARGS__))
#endif

#endif
