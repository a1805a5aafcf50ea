#pragma once
// The file format of save(A, path) and h2_matrix<T, Space>::load(path): everything an h2_data holds
// (options, cluster trees, matrix tree, bases, transfers, coupling and dense blocks at their per-node
// ranks, symmetry), staged through the host. Little-endian; a 40-byte header, then the payload:
//
//   header:  "H2EXPR\r\n" | u32 version | u32 value type (1 float, 2 double) | u64 payload bytes |
//            u64 checksum of the payload (64-bit FNV-1a over 8-byte words, then the tail bytes) |
//            u64 0 (reserved)
//   payload: i64 and f64 scalars; arrays as u64 count + raw values (see write_payload)
//
// save writes a temporary file in the target's folder, flushes it to the disk and renames it over the
// target, so the target is either the old file or the whole new one. load checks the header, the
// length and the checksum, then every size against the structure it describes, before anything is
// used: a missing, truncated, corrupted or newer file, or one of the other value type, raises
// h2expr::file_error naming the file and what is wrong.
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <unistd.h>

namespace h2expr::detail {

inline constexpr char h2_file_magic[8] = {'H', '2', 'E', 'X', 'P', 'R', '\r', '\n'};
inline constexpr std::uint32_t h2_file_version = 1;
inline constexpr std::size_t h2_file_header_bytes = 40;

template <class T>
constexpr std::uint32_t value_type_code() {
  return std::is_same_v<T, float> ? 1 : 2;
}
inline const char* value_type_name(std::uint32_t code) { return code == 1 ? "float" : code == 2 ? "double" : "unknown"; }

// The payload checksum, fed in pieces of any length (the word grouping is the stream's, not the pieces').
class file_checksum {
 public:
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      word_ |= std::uint64_t(p[i]) << (8 * fill_);
      if (++fill_ == 8) flush();
    }
  }
  std::uint64_t value() const {
    std::uint64_t h = hash_;
    for (int i = 0; i < fill_; ++i) h = (h ^ ((word_ >> (8 * i)) & 0xff)) * prime;
    return h;
  }

 private:
  static constexpr std::uint64_t prime = 0x100000001b3ull;
  void flush() {
    hash_ = (hash_ ^ word_) * prime;
    word_ = 0;
    fill_ = 0;
  }
  std::uint64_t hash_ = 0xcbf29ce484222325ull, word_ = 0;
  int fill_ = 0;
};

struct file_closer {
  void operator()(std::FILE* f) const noexcept {
    if (f) std::fclose(f);
  }
};
using file_handle = std::unique_ptr<std::FILE, file_closer>;

class file_writer {
 public:
  file_writer(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  void raw(const void* data, std::size_t n) {
    if (n && std::fwrite(data, 1, n, f_) != n) throw file_error("h2expr: save: writing " + path_ + " failed (disk full?)");
    sum_.add(data, n);
    bytes_ += n;
  }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  template <class V>
  void array(const std::vector<V>& v) {
    i64(std::int64_t(v.size()));
    raw(v.data(), v.size() * sizeof(V));
  }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t checksum() const { return sum_.value(); }

 private:
  std::FILE* f_;
  std::string path_;
  file_checksum sum_;
  std::uint64_t bytes_ = 0;
};

class file_reader {
 public:
  file_reader(std::FILE* f, std::string path, std::uint64_t payload) : f_(f), path_(std::move(path)), left_(payload) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw file_error("h2expr: load: " + path_ + ": " + what);
  }
  void raw(void* data, std::size_t n) {
    if (n > left_) fail("truncated or corrupted (a record runs past the payload's length)");
    if (n && std::fread(data, 1, n, f_) != n) fail("truncated (the file ends before its payload does)");
    left_ -= n;
  }
  std::int64_t i64() {
    std::int64_t v;
    raw(&v, sizeof v);
    return v;
  }
  double f64() {
    double v;
    raw(&v, sizeof v);
    return v;
  }
  // An integer in [lo, hi], else the file is corrupted.
  std::int64_t i64_in(std::int64_t lo, std::int64_t hi, const char* what) {
    const std::int64_t v = i64();
    if (v < lo || v > hi) fail(std::string("corrupted: ") + what + " = " + std::to_string(v) + " is out of range");
    return v;
  }
  template <class V>
  std::vector<V> array() {
    const std::int64_t n = i64();
    // The count must fit the bytes that are left: a corrupted count never allocates more than the file holds.
    if (n < 0 || std::uint64_t(n) > left_ / sizeof(V)) fail("corrupted: an array's length runs past the payload");
    std::vector<V> v(static_cast<std::size_t>(n));
    raw(v.data(), v.size() * sizeof(V));
    return v;
  }
  std::uint64_t left() const { return left_; }

 private:
  std::FILE* f_;
  std::string path_;
  std::uint64_t left_;
};

// What load needs from structure<T>'s private parts.
struct structure_access {
  template <class T>
  static structure<T> make(std::shared_ptr<const cluster_tree> rows, std::shared_ptr<const cluster_tree> cols,
                           matrix_tree blocks, const build_options& options, std::vector<T> tree_points) {
    return structure<T>(std::move(rows), std::move(cols), std::move(blocks), options, std::move(tree_points));
  }
};

inline void write_tree(file_writer& w, const cluster_tree& t) {
  w.i64(t.depth), w.i64(t.dim), w.i64(t.max_leaf_size);
  w.array(t.perm), w.array(t.begin), w.array(t.end), w.array(t.box_min), w.array(t.box_max);
}

inline std::shared_ptr<const cluster_tree> read_tree(file_reader& r) {
  cluster_tree t;
  t.depth = int(r.i64_in(0, 29, "tree depth"));
  t.dim = int(r.i64_in(0, 64, "tree dimension"));
  t.max_leaf_size = int(r.i64_in(0, INT32_MAX, "largest leaf"));
  t.perm = r.array<int>(), t.begin = r.array<int>(), t.end = r.array<int>();
  t.box_min = r.array<double>(), t.box_max = r.array<double>();
  const std::size_t nodes = std::size_t(t.nodes()), n = t.perm.size();
  if (t.begin.size() != nodes || t.end.size() != nodes || t.box_min.size() != nodes * std::size_t(t.dim) ||
      t.box_max.size() != t.box_min.size() || n == 0 || n > std::size_t(INT32_MAX))
    r.fail("corrupted: a cluster tree's arrays do not match its depth");
  std::vector<char> seen(n, 0);
  for (int p : t.perm) {
    if (p < 0 || std::size_t(p) >= n || seen[std::size_t(p)]) r.fail("corrupted: a cluster tree's permutation");
    seen[std::size_t(p)] = 1;
  }
  int largest = 0;
  for (std::size_t v = 0; v < nodes; ++v) {
    if (t.begin[v] < 0 || t.begin[v] > t.end[v] || std::size_t(t.end[v]) > n) r.fail("corrupted: a cluster's range");
    if (cluster_tree::level_of(int(v)) == t.depth) largest = std::max(largest, t.size(int(v)));
  }
  if (largest != t.max_leaf_size || t.begin[0] != 0 || std::size_t(t.end[0]) != n)
    r.fail("corrupted: a cluster tree's ranges do not cover its points");
  for (int v = 0; v < cluster_tree::level_begin(t.depth); ++v) {  // children split their parent's range
    const int a = cluster_tree::left_child(v), b = cluster_tree::right_child(v);
    if (t.begin[a] != t.begin[v] || t.end[a] != t.begin[b] || t.end[b] != t.end[v])
      r.fail("corrupted: a cluster's children do not split its range");
  }
  return std::make_shared<const cluster_tree>(std::move(t));
}

inline void write_level(file_writer& w, const block_sparse_level& l) { w.array(l.row_ptr), w.array(l.col); }

inline block_sparse_level read_level(file_reader& r, int level_size, int col_size) {
  const auto row_ptr = r.array<int>(), col = r.array<int>();
  if (row_ptr.size() != std::size_t(level_size) + 1 || row_ptr[0] != 0 || std::size_t(row_ptr.back()) != col.size())
    r.fail("corrupted: a level of the matrix tree");
  std::vector<std::pair<int, int>> pairs;
  for (int t = 0; t < level_size; ++t) {
    if (row_ptr[t] > row_ptr[t + 1]) r.fail("corrupted: a level of the matrix tree");
    for (int b = row_ptr[t]; b < row_ptr[t + 1]; ++b) {
      if (col[b] < 0 || col[b] >= col_size || (b > row_ptr[t] && col[b] <= col[b - 1]))
        r.fail("corrupted: a level of the matrix tree");
      pairs.push_back({t, col[b]});
    }
  }
  return make_block_sparse_level(level_size, std::move(pairs));
}

template <class T, class Space>
void write_basis(file_writer& w, const basis_tree<T, Space>& b) {
  w.i64(b.orthonormal);
  w.i64(std::int64_t(b.node_rank.size()));
  for (const auto& r : b.node_rank) w.array(r);
  w.array(b.leaves.to_host());
  w.i64(std::int64_t(b.transfers.size()));
  for (const auto& t : b.transfers) w.array(t.to_host());
}

// A basis, its sizes checked against its layout (node ranks, or the level ranks).
template <class T, class Space>
std::shared_ptr<basis_tree<T, Space>> read_basis(file_reader& r, const context_ptr<Space>& ctx,
                                                 const std::vector<int>& rank, int m_max) {
  const int L = int(rank.size()) - 1;
  auto b = std::make_shared<basis_tree<T, Space>>();
  b->orthonormal = r.i64_in(0, 1, "orthonormal flag") == 1;
  const auto levels = r.i64_in(0, L + 1, "basis levels");
  if (levels != 0 && levels != L + 1) r.fail("corrupted: a basis's node ranks");
  for (std::int64_t l = 0; l < levels; ++l) {
    b->node_rank.push_back(r.array<int>());
    if (b->node_rank.back().size() != std::size_t(1) << l) r.fail("corrupted: a basis's node ranks");
    for (int k : b->node_rank.back())
      if (k < 0 || k > rank[l]) r.fail("corrupted: a node rank above its level's");
  }
  const basis_layout layout = b->layout(rank);
  const auto leaves = r.array<T>();
  if (leaves.size() != std::size_t(m_max) * std::size_t(layout.total(L))) r.fail("corrupted: a basis's leaves");
  b->leaves = buffer<T, Space>(ctx, leaves);
  const auto transfers = r.i64_in(L + 1, L + 1, "transfer levels");
  b->transfers.resize(std::size_t(transfers));
  for (int l = 0; l <= L; ++l) {
    const auto t = r.array<T>();
    if (t.size() != (l == 0 ? 0 : std::size_t(layout.transfers[l].back()))) r.fail("corrupted: a basis's transfers");
    b->transfers[l] = buffer<T, Space>(ctx, t);
  }
  return b;
}

template <class T, class Space>
void write_payload(file_writer& w, const h2_data<T, Space>& d) {
  const auto& s = d.structure;
  const build_options& o = s.options();
  w.i64(o.leaf_size), w.f64(o.eta), w.i64(o.cheb_points), w.i64(o.weak_admissibility);
  require(s.symmetric_trees(), "save: separate row and column trees are not supported");
  w.i64(1);
  write_tree(w, s.row_tree());
  w.array(s.tree_points());
  w.i64(std::int64_t(s.blocks().coupling.size()));
  for (const auto& l : s.blocks().coupling) write_level(w, l);
  write_level(w, s.blocks().dense);
  w.i64(d.m_max), w.i64(d.symmetric);
  w.array(d.rank);
  w.i64(d.row_basis == d.col_basis);
  write_basis(w, *d.row_basis);
  if (d.row_basis != d.col_basis) write_basis(w, *d.col_basis);
  for (const auto& c : d.coupling) w.array(c.to_host());
  w.array(d.dense.to_host());
}

template <class T, class Space>
h2_data<T, Space> read_payload(file_reader& r, context_ptr<Space> ctx) {
  build_options o;
  o.leaf_size = int(r.i64_in(1, INT32_MAX, "leaf size"));
  o.eta = r.f64();
  o.cheb_points = int(r.i64_in(1, INT32_MAX, "Chebyshev points"));
  o.weak_admissibility = r.i64_in(0, 1, "weak admissibility") == 1;
  if (!(o.eta > 0 && o.eta < 1e300)) r.fail("corrupted: eta");
  // Rows and columns share one cluster tree in every matrix h2expr builds (and its products rely on it).
  if (r.i64_in(0, 1, "shared trees flag") != 1) r.fail("separate row and column trees are not supported");
  auto rows = read_tree(r);
  auto cols = rows;
  auto tree_points = r.array<T>();
  if (tree_points.size() != std::size_t(rows->dim) * rows->perm.size() && !tree_points.empty())
    r.fail("corrupted: the points");
  const int L = rows->depth;
  r.i64_in(L + 1, L + 1, "matrix tree levels");
  matrix_tree blocks;
  for (int l = 0; l <= L; ++l) blocks.coupling.push_back(read_level(r, 1 << l, 1 << l));
  blocks.dense = read_level(r, 1 << L, 1 << L);

  h2_data<T, Space> d;
  d.ctx = std::move(ctx);
  d.structure = structure_access::make<T>(rows, cols, std::move(blocks), o, std::move(tree_points));
  // Every builder pads leaves to the largest one; the padded leaf rows and every level's coefficient
  // rows are handed to the primitives as int.
  const int m = std::max(rows->max_leaf_size, 1);
  d.m_max = int(r.i64_in(m, m, "padded leaf size"));
  if (std::int64_t(m) << L > INT32_MAX) r.fail("corrupted: the padded leaves overflow 32-bit sizes");
  d.symmetric = r.i64_in(0, 1, "symmetric flag") == 1;
  d.rank = r.array<int>();
  if (d.rank.size() != std::size_t(L) + 1) r.fail("corrupted: the ranks per level");
  for (int l = 0; l <= L; ++l)
    if (d.rank[l] < 0 || d.rank[l] > 1 << 16 || (std::int64_t(d.rank[l]) << l) > INT32_MAX)
      r.fail("corrupted: the rank of level " + std::to_string(l) + " is out of range");
  const bool shared_basis = r.i64_in(0, 1, "shared basis flag") == 1;
  d.row_basis = read_basis<T, Space>(r, d.ctx, d.rank, d.m_max);
  d.col_basis = shared_basis ? d.row_basis : read_basis<T, Space>(r, d.ctx, d.rank, d.m_max);
  const basis_layout rl = d.row_basis->layout(d.rank), cl = d.col_basis->layout(d.rank);
  for (int l = 0; l <= L; ++l) {
    const auto c = r.array<T>();
    if (c.size() != std::size_t(d.coupling_offsets(l, rl, cl).back())) r.fail("corrupted: the coupling blocks");
    d.coupling.emplace_back(d.ctx, c);
  }
  const auto dense = r.array<T>();
  const auto& dl = d.structure.blocks().dense;
  if (dense.size() != std::size_t(dl.blocks()) * std::size_t(d.m_max) * std::size_t(d.m_max))
    r.fail("corrupted: the dense blocks");
  d.dense = buffer<T, Space>(d.ctx, dense);
  d.arrays = std::make_shared<const space_structure<Space>>(d.ctx, d.structure.row_tree(), d.structure.blocks(), d.m_max);
  return d;
}

inline void require_little_endian(const std::string& what) {
  if constexpr (std::endian::native != std::endian::little)
    throw file_error("h2expr: " + what + ": the file format is little-endian; this machine is not");
}

template <class T, class Space>
void save_h2(const h2_data<T, Space>& d, const std::string& path) {
  require_little_endian("save " + path);
  // A fresh temporary name in the target's folder (rename is atomic only within one file system),
  // created exclusively ("x"): never another writer's file.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  file_handle f(std::fopen(tmp.c_str(), "wbx"));
  if (!f) throw file_error("h2expr: save: cannot create " + tmp + " (beside " + path + "): " + std::strerror(errno));
  try {
    char header[h2_file_header_bytes] = {};
    if (std::fwrite(header, 1, sizeof header, f.get()) != sizeof header)
      throw file_error("h2expr: save: writing " + tmp + " failed");
    file_writer w(f.get(), path);
    write_payload(w, d);
    std::memcpy(header, h2_file_magic, 8);
    const std::uint32_t version = h2_file_version, type = value_type_code<T>();
    const std::uint64_t bytes = w.bytes(), sum = w.checksum();
    std::memcpy(header + 8, &version, 4), std::memcpy(header + 12, &type, 4);
    std::memcpy(header + 16, &bytes, 8), std::memcpy(header + 24, &sum, 8);
    if (std::fseek(f.get(), 0, SEEK_SET) != 0 || std::fwrite(header, 1, sizeof header, f.get()) != sizeof header ||
        std::fflush(f.get()) != 0 || ::fsync(::fileno(f.get())) != 0)
      throw file_error("h2expr: save: writing " + tmp + " failed (disk full?)");
    if (std::fclose(f.release()) != 0) throw file_error("h2expr: save: closing " + tmp + " failed");
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw file_error("h2expr: save: cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  } catch (...) {
    f.reset();
    std::remove(tmp.c_str());
    throw;
  }
}

template <class T, class Space>
h2_data<T, Space> load_h2(const std::string& path, context_ptr<Space> ctx) {
  require_little_endian("load " + path);
  file_handle f(std::fopen(path.c_str(), "rb"));
  if (!f) throw file_error("h2expr: load: cannot open " + path + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) -> void { throw file_error("h2expr: load: " + path + ": " + what); };
  char header[h2_file_header_bytes];
  if (std::fread(header, 1, sizeof header, f.get()) != sizeof header) fail("truncated (shorter than the header)");
  if (std::memcmp(header, h2_file_magic, 8) != 0) fail("not an h2expr matrix file");
  std::uint32_t version, type;
  std::uint64_t bytes, sum;
  std::memcpy(&version, header + 8, 4), std::memcpy(&type, header + 12, 4);
  std::memcpy(&bytes, header + 16, 8), std::memcpy(&sum, header + 24, 8);
  if (version > h2_file_version)
    fail("format version " + std::to_string(version) + " is newer than this library's (" +
         std::to_string(h2_file_version) + ")");
  if (version == 0) fail("corrupted header (version 0)");
  if (type != value_type_code<T>())
    fail(std::string("saved with ") + value_type_name(type) + " values, loaded as " +
         value_type_name(value_type_code<T>()));
  // The payload's length against the file's: a truncated file is named so before anything is read.
  if (std::fseek(f.get(), 0, SEEK_END) != 0) fail("cannot seek");
  const long end = std::ftell(f.get());
  if (end < 0 || std::uint64_t(end) - h2_file_header_bytes != bytes)
    fail("truncated or padded: " + std::to_string(end) + " bytes, the header says " +
         std::to_string(bytes + h2_file_header_bytes));
  if (std::fseek(f.get(), long(h2_file_header_bytes), SEEK_SET) != 0) fail("cannot seek");
  // The checksum first, over the whole payload, so a corrupted file is reported as such (and not as
  // whatever its damaged records would make of it).
  {
    file_checksum check;
    std::vector<char> chunk(std::size_t(1) << 20);
    for (std::uint64_t left = bytes; left > 0;) {
      const std::size_t n = std::size_t(std::min<std::uint64_t>(left, chunk.size()));
      if (std::fread(chunk.data(), 1, n, f.get()) != n) fail("truncated (the file ends before its payload does)");
      check.add(chunk.data(), n);
      left -= n;
    }
    if (check.value() != sum) fail("corrupted (checksum mismatch)");
  }
  if (std::fseek(f.get(), long(h2_file_header_bytes), SEEK_SET) != 0) fail("cannot seek");
  file_reader r(f.get(), path, bytes);
  h2_data<T, Space> d = read_payload<T, Space>(r, std::move(ctx));
  if (r.left() != 0) fail("corrupted: " + std::to_string(r.left()) + " bytes after the last record");
  return d;
}

}  // namespace h2expr::detail
