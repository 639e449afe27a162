#include "core/pgm/graphical_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/public_rng.h"
#include "core/util/union_find.h"

namespace dpcurator::pgm {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Counts beyond this magnitude are no record count; clipping keeps squares finite.
constexpr double kMaxCount = 1e15;
// Armijo backtracking halvings per iteration (the public implementation's 25).
constexpr int kMaxBacktracks = 25;
constexpr double kMaxStepSize = 1e100;
// The log-potential of a cell fixed at 0 (EstimateOptions::zero_below_sigmas):
// finite, so no sum in the calibration is -inf - -inf even if every cell of
// a clique were fixed, and far enough below any fitted potential that
// exp(.) underflows to exactly 0 beside an unfixed cell.
constexpr double kZeroedLogPotential = -1e6;

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    return std::numeric_limits<int64_t>::max();
  }
  return a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max()
                                                     : a + b;
}

int64_t TableCells(const std::vector<int>& vars, const std::vector<int>& domain_sizes) {
  int64_t cells = 1;
  for (int v : vars) cells = SaturatingMul(cells, domain_sizes[v]);
  return cells;
}

// Visits every cell of a row-major table of `shape` (last axis fastest), in
// order, calling f(cell, sub) where sub[k] = sum_axis code_axis * strides[k][axis]
// (a row-major index into a smaller or permuted table; stride 0 for an axis the
// other table lacks). Incremental: no division and no allocation per cell.
template <size_t K, typename F>
void ForEachCell(const std::vector<int>& shape,
                 const std::array<const std::vector<int64_t>*, K>& strides, F&& f) {
  const int rank = static_cast<int>(shape.size());
  std::array<int64_t, K> sub{};
  if (rank == 0) {
    f(int64_t{0}, sub);
    return;
  }
  std::vector<int> counter(rank, 0);
  const int last = rank - 1;
  const int n_last = shape[last];
  std::array<int64_t, K> s_last;
  for (size_t k = 0; k < K; ++k) s_last[k] = (*strides[k])[last];
  int64_t cell = 0;
  while (true) {
    std::array<int64_t, K> idx = sub;
    for (int j = 0; j < n_last; ++j) {
      f(cell++, idx);
      for (size_t k = 0; k < K; ++k) idx[k] += s_last[k];
    }
    int axis = last - 1;
    while (axis >= 0) {
      if (++counter[axis] < shape[axis]) {
        for (size_t k = 0; k < K; ++k) sub[k] += (*strides[k])[axis];
        break;
      }
      for (size_t k = 0; k < K; ++k) sub[k] -= (*strides[k])[axis] * (shape[axis] - 1);
      counter[axis] = 0;
      --axis;
    }
    if (axis < 0) return;
  }
}

std::vector<int> ShapeOf(const std::vector<int>& vars, const std::vector<int>& domain_sizes) {
  std::vector<int> shape;
  shape.reserve(vars.size());
  for (int v : vars) shape.push_back(domain_sizes[v]);
  return shape;
}

// For each axis of a table over `vars`: its stride in the row-major table
// over `sub_vars` (in sub_vars' order), 0 where sub_vars lacks the attribute.
std::vector<int64_t> SubStrides(const std::vector<int>& vars, const std::vector<int>& sub_vars,
                                const std::vector<int>& domain_sizes) {
  std::vector<int64_t> sub_stride(sub_vars.size());
  int64_t s = 1;
  for (int k = static_cast<int>(sub_vars.size()) - 1; k >= 0; --k) {
    sub_stride[k] = s;
    s *= domain_sizes[sub_vars[k]];
  }
  std::vector<int64_t> out(vars.size(), 0);
  for (size_t a = 0; a < vars.size(); ++a) {
    for (size_t k = 0; k < sub_vars.size(); ++k) {
      if (sub_vars[k] == vars[a]) out[a] = sub_stride[k];
    }
  }
  return out;
}

bool IsSubset(const std::vector<int>& small, const std::vector<int>& sorted_big) {
  for (int v : small) {
    if (!std::binary_search(sorted_big.begin(), sorted_big.end(), v)) return false;
  }
  return true;
}

std::vector<int> SortedIntersection(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int> SortedUnion(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// The junction tree of the graph whose edges join attributes sharing a
// clique: greedy min-fill elimination (Koller & Friedman 2009, Sec. 9.4.3.2)
// gives a chordal supergraph; its maximal cliques joined by a maximum
// spanning tree on separator sizes form a junction tree (ibid., Thm. 10.6).
// Zero-size separators join the components into one tree. Returns cliques
// (ascending attributes) in an order where clique 0 is the root and every
// parent precedes its children, with parents[c].
struct JunctionTree {
  std::vector<std::vector<int>> cliques;
  std::vector<int> parents;
};

JunctionTree BuildJunctionTree(const std::vector<int>& domain_sizes,
                               const std::vector<std::vector<int>>& sets) {
  const int n = static_cast<int>(domain_sizes.size());
  std::vector<std::vector<char>> adjacent(n, std::vector<char>(n, 0));
  // Live neighbours of each attribute (unordered), beside the matrix: a wide
  // sparse graph (AIM past 64 columns, issue 41: 1,071 attributes) is then
  // triangulated in O(sum of deg^2) per step instead of O(n^2).
  std::vector<std::vector<int>> neighbours_of(n);
  auto connect = [&](int a, int b) {
    if (a == b || adjacent[a][b]) return;
    adjacent[a][b] = adjacent[b][a] = 1;
    neighbours_of[a].push_back(b);
    neighbours_of[b].push_back(a);
  };
  for (const std::vector<int>& set : sets) {
    for (int a : set) {
      for (int b : set) {
        if (a >= 0 && b >= 0 && a < n && b < n) connect(a, b);
      }
    }
  }
  // Each attribute's min-fill key (fill-in edges, then its clique's cells),
  // cached and recomputed only where an elimination changed it: the
  // eliminated attribute's neighbours and theirs. The choice is the same
  // as scanning every attribute each step: least (fill, cells, index).
  std::vector<int64_t> fill(n, 0);
  std::vector<int64_t> cells(n, 0);
  auto rescore = [&](int v) {
    const std::vector<int>& nb = neighbours_of[v];
    int64_t f = 0;
    int64_t c = domain_sizes[v];
    for (size_t i = 0; i < nb.size(); ++i) {
      c = SaturatingMul(c, domain_sizes[nb[i]]);
      for (size_t j = i + 1; j < nb.size(); ++j) {
        if (!adjacent[nb[i]][nb[j]]) ++f;
      }
    }
    fill[v] = f;
    cells[v] = c;
  };
  for (int v = 0; v < n; ++v) rescore(v);
  std::vector<char> eliminated(n, 0);
  std::vector<char> dirty(n, 0);
  std::vector<std::vector<int>> elimination_cliques;
  for (int step = 0; step < n; ++step) {
    int best = -1;
    for (int v = 0; v < n; ++v) {
      if (eliminated[v]) continue;
      if (best < 0 || fill[v] < fill[best] || (fill[v] == fill[best] && cells[v] < cells[best])) {
        best = v;
      }
    }
    std::vector<int> clique = neighbours_of[best];
    for (size_t i = 0; i < clique.size(); ++i) {
      for (size_t j = i + 1; j < clique.size(); ++j) connect(clique[i], clique[j]);
    }
    eliminated[best] = 1;
    std::vector<int> touched;
    for (int u : clique) {
      std::vector<int>& nb = neighbours_of[u];
      nb.erase(std::find(nb.begin(), nb.end(), best));
      adjacent[u][best] = adjacent[best][u] = 0;
      if (!dirty[u]) touched.push_back(u);
      dirty[u] = 1;
      for (int w : nb) {
        if (!dirty[w]) touched.push_back(w);
        dirty[w] = 1;
      }
    }
    for (int u : touched) {
      rescore(u);
      dirty[u] = 0;
    }
    neighbours_of[best].clear();
    clique.push_back(best);
    std::sort(clique.begin(), clique.end());
    elimination_cliques.push_back(std::move(clique));
  }
  // A clique formed later never contains an earlier one's eliminated
  // attribute, so only earlier cliques can contain a later one.
  std::vector<std::vector<int>> maximal;
  for (size_t i = 0; i < elimination_cliques.size(); ++i) {
    bool contained = false;
    for (size_t j = 0; j < i && !contained; ++j) {
      contained = elimination_cliques[j].size() >= elimination_cliques[i].size() &&
                  IsSubset(elimination_cliques[i], elimination_cliques[j]);
    }
    if (!contained) maximal.push_back(elimination_cliques[i]);
  }
  const int m = static_cast<int>(maximal.size());
  // Kruskal on separator sizes, heaviest first, ties in (a, b) order, then
  // the zero-size separators in (a, b) order. Only cliques sharing an
  // attribute have a positive separator, so those pairs are found through
  // the attributes; the zero-size ones join whole components, so the
  // (a, b) scan stops once one tree remains.
  struct Edge {
    int weight, a, b;
  };
  std::vector<std::vector<int>> holders(n);
  for (int a = 0; a < m; ++a) {
    for (int v : maximal[a]) holders[v].push_back(a);
  }
  std::map<std::pair<int, int>, int> shared;
  for (const std::vector<int>& h : holders) {
    for (size_t i = 0; i < h.size(); ++i) {
      for (size_t j = i + 1; j < h.size(); ++j) ++shared[{h[i], h[j]}];
    }
  }
  std::vector<Edge> edges;
  for (const auto& [ab, weight] : shared) edges.push_back({weight, ab.first, ab.second});
  std::stable_sort(edges.begin(), edges.end(),
                   [](const Edge& x, const Edge& y) { return x.weight > y.weight; });
  UnionFind forest(m);
  std::vector<std::vector<int>> tree(m);
  int components = m;
  auto join = [&](int a, int b) {
    if (forest.Union(a, b)) {
      tree[a].push_back(b);
      tree[b].push_back(a);
      --components;
    }
  };
  for (const Edge& e : edges) join(e.a, e.b);
  for (int a = 0; a < m && components > 1; ++a) {
    for (int b = a + 1; b < m && components > 1; ++b) {
      if (!shared.contains({a, b})) join(a, b);
    }
  }
  // Breadth-first from maximal clique 0: parents precede children.
  JunctionTree out;
  std::vector<int> order = {0};
  std::vector<int> parent_of(m, -1);
  std::vector<char> seen(m, 0);
  seen[0] = 1;
  for (size_t head = 0; head < order.size(); ++head) {
    for (int child : tree[order[head]]) {
      if (seen[child]) continue;
      seen[child] = 1;
      parent_of[child] = order[head];
      order.push_back(child);
    }
  }
  std::vector<int> position(m);
  for (int i = 0; i < m; ++i) position[order[i]] = i;
  for (int i = 0; i < m; ++i) {
    out.cliques.push_back(maximal[order[i]]);
    out.parents.push_back(parent_of[order[i]] < 0 ? -1 : position[parent_of[order[i]]]);
  }
  return out;
}

// Log-sum-exp of `table` into the separator table `out` (indices by
// `strides`), stable per separator cell (its own maximum), so no separator
// cell underflows to -inf while its clique cells are finite. The exponentials
// run in one vectorised Eigen pass over `scratch` (>= the table's size).
void LogSumExpTo(const Eigen::VectorXd& table, const std::vector<int>& shape,
                 const std::vector<int64_t>& strides, Eigen::VectorXd* out,
                 Eigen::VectorXd* scratch_max, Eigen::VectorXd* scratch) {
  scratch_max->setConstant(kNegInf);
  double* mx = scratch_max->data();
  const double* t = table.data();
  double* tmp = scratch->data();
  ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
    mx[s[0]] = std::max(mx[s[0]], t[cell]);
  });
  ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
    tmp[cell] = mx[s[0]] == kNegInf ? kNegInf : t[cell] - mx[s[0]];
  });
  const Eigen::Index n = table.size();
  scratch->head(n) = scratch->head(n).array().exp();
  out->setZero();
  double* o = out->data();
  ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
    o[s[0]] += tmp[cell];
  });
  for (Eigen::Index i = 0; i < out->size(); ++i) {
    o[i] = mx[i] == kNegInf ? kNegInf : mx[i] + std::log(o[i]);
  }
}

// out[sub(cell)] += table[cell].
void SumToTable(const Eigen::VectorXd& table, const std::vector<int>& shape,
           const std::vector<int64_t>& strides, Eigen::VectorXd* out) {
  out->setZero();
  double* o = out->data();
  const double* t = table.data();
  ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
    o[s[0]] += t[cell];
  });
}

// table[cell] += message[sub(cell)].
void AddBroadcast(const Eigen::VectorXd& message, const std::vector<int>& shape,
                  const std::vector<int64_t>& strides, Eigen::VectorXd* table) {
  double* t = table->data();
  const double* m = message.data();
  ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
    t[cell] += m[s[0]];
  });
}

}  // namespace

int64_t JunctionTreeCells(const std::vector<int>& domain_sizes,
                          const std::vector<std::vector<int>>& cliques) {
  for (int d : domain_sizes) {
    if (d < 1) return 0;
  }
  if (domain_sizes.empty()) return 0;
  const JunctionTree tree = BuildJunctionTree(domain_sizes, cliques);
  int64_t cells = 0;
  for (const std::vector<int>& c : tree.cliques) {
    cells = SaturatingAdd(cells, TableCells(c, domain_sizes));
  }
  return cells;
}

// The fit's working state: the model's tables plus the separators' strides
// and messages, the merged measurements and their host cliques.
class Estimator {
 public:
  struct Group {
    std::vector<int> vars;   // ascending
    Eigen::VectorXd y;       // merged counts, layout over vars
    double weight = 0.0;     // sum of 1 / sigma^2 (relative to the smallest sigma)
    int host = 0;            // a junction-tree clique containing vars
    std::vector<int64_t> host_strides;  // host axes -> group table
    Eigen::VectorXd scratch;
  };

  Estimator(GraphicalModel* model, std::vector<Group> groups)
      : model_(*model), groups_(std::move(groups)) {
    const int m = static_cast<int>(model_.cliques_.size());
    const auto& ds = model_.domain_sizes_;
    shapes_.resize(m);
    to_parent_sep_.resize(m);
    parent_to_sep_.resize(m);
    up_.resize(m);
    down_.resize(m);
    max_scratch_.resize(m);
    children_.resize(m);
    partial_.resize(m);
    grad_.resize(m);
    for (int c = 0; c < m; ++c) {
      shapes_[c] = ShapeOf(model_.cliques_[c], ds);
      const int64_t cells = TableCells(model_.cliques_[c], ds);
      partial_[c].resize(cells);
      if (cells > exp_scratch_.size()) exp_scratch_.resize(cells);
      grad_[c].resize(cells);
      const int p = model_.parents_[c];
      if (p < 0) continue;
      children_[p].push_back(c);
      const std::vector<int> sep = SortedIntersection(model_.cliques_[c], model_.cliques_[p]);
      to_parent_sep_[c] = SubStrides(model_.cliques_[c], sep, ds);
      parent_to_sep_[c] = SubStrides(model_.cliques_[p], sep, ds);
      const int64_t sep_cells = TableCells(sep, ds);
      up_[c].resize(sep_cells);
      down_[c].resize(sep_cells);
      max_scratch_[c].resize(sep_cells);
    }
    for (Group& g : groups_) {
      g.host_strides = SubStrides(model_.cliques_[g.host], g.vars, ds);
      g.scratch.resize(g.y.size());
    }
  }

  // Exact sum-product in log space on the junction tree (upward pass from the
  // leaves, downward from the root; the downward message divides out, here
  // subtracts, the upward one: Hugin's update), then mu = total * normalised
  // exp(beliefs). A clique's downward messages are sums of its exponentiated
  // belief (computed once, it is also mu), so each cell costs two exp per
  // calibration. theta is finite, so upward messages are finite; a
  // downward message is -inf only where the belief underflowed to 0, and
  // never -inf - -inf.
  void Calibrate(const std::vector<Eigen::VectorXd>& theta, std::vector<Eigen::VectorXd>* mu) {
    const int m = static_cast<int>(theta.size());
    for (int c = m - 1; c >= 0; --c) {
      partial_[c] = theta[c];
      for (int k : children_[c]) AddBroadcast(up_[k], shapes_[c], parent_to_sep_[k], &partial_[c]);
      if (model_.parents_[c] >= 0) {
        LogSumExpTo(partial_[c], shapes_[c], to_parent_sep_[c], &up_[c], &max_scratch_[c],
                    &exp_scratch_);
      }
    }
    for (int c = 0; c < m; ++c) {
      Eigen::VectorXd& belief = (*mu)[c];
      belief = partial_[c];
      if (model_.parents_[c] >= 0) AddBroadcast(down_[c], shapes_[c], to_parent_sep_[c], &belief);
      const double mx = belief.maxCoeff();
      belief = (belief.array() - mx).exp().matrix();
      for (int k : children_[c]) {
        SumToTable(belief, shapes_[c], parent_to_sep_[k], &down_[k]);
        for (Eigen::Index i = 0; i < down_[k].size(); ++i) {
          down_[k][i] = down_[k][i] > 0.0 ? std::log(down_[k][i]) + mx - up_[k][i] : kNegInf;
        }
      }
      belief *= model_.total_ / belief.sum();
    }
  }

  // sum_g w_g ||mu_g - y_g||^2 and its gradient in mu, broadcast into the
  // host cliques' tables (grad_).
  double LossAndGradient(const std::vector<Eigen::VectorXd>& mu) {
    for (Eigen::VectorXd& g : grad_) g.setZero();
    double loss = 0.0;
    for (Group& g : groups_) {
      g.scratch.setZero();
      double* s = g.scratch.data();
      const double* h = mu[g.host].data();
      ForEachCell<1>(shapes_[g.host], {&g.host_strides},
                     [&](int64_t cell, const std::array<int64_t, 1>& i) { s[i[0]] += h[cell]; });
      g.scratch -= g.y;
      loss += g.weight * g.scratch.squaredNorm();
      g.scratch *= 2.0 * g.weight;
      AddBroadcast(g.scratch, shapes_[g.host], g.host_strides, &grad_[g.host]);
    }
    return loss;
  }

  // Private-PGM Alg. 1 (mirror descent on the marginal polytope, in theta)
  // with Armijo backtracking: halve the step until the loss decreases by at
  // least alpha / 2 * <grad, mu_old - mu_new>. The public implementation
  // doubles the step before every iteration; here only after an iteration
  // that needed no halving (measured on Adult's domain, bench/pgm_bench:
  // 17% fewer belief propagations for a slightly lower loss, since the
  // doubled step was rejected about every other iteration).
  void Fit(int iterations) {
    const int m = static_cast<int>(model_.cliques_.size());
    std::vector<Eigen::VectorXd>& theta = model_.theta_;
    std::vector<Eigen::VectorXd>& mu = model_.mu_;
    mu.resize(m);
    ApplyZeros(&theta);
    Calibrate(theta, &mu);
    double loss = LossAndGradient(mu);
    std::vector<Eigen::VectorXd> old_theta(m), old_mu(m), old_grad(m);
    double alpha = model_.step_size_;
    bool backtracked = false;
    for (int t = 0; t < iterations; ++t) {
      old_theta = theta;
      old_mu = mu;
      old_grad = grad_;
      const double old_loss = loss;
      // Capped so that alpha * grad stays finite on any input.
      if (!backtracked) alpha = std::min(2.0 * alpha, kMaxStepSize);
      backtracked = false;
      bool accepted = false;
      for (int b = 0; b < kMaxBacktracks; ++b) {
        for (int c = 0; c < m; ++c) theta[c] = old_theta[c] - alpha * old_grad[c];
        ApplyZeros(&theta);
        Calibrate(theta, &mu);
        loss = LossAndGradient(mu);
        double decrease = 0.0;
        for (int c = 0; c < m; ++c) decrease += old_grad[c].dot(old_mu[c] - mu[c]);
        if (old_loss - loss >= 0.5 * alpha * decrease) {
          accepted = true;
          break;
        }
        alpha *= 0.5;
        backtracked = true;
      }
      if (!accepted) {
        // No step decreased the loss enough: stay put (the gradient is
        // below the arithmetic's resolution).
        theta = old_theta;
        mu = old_mu;
        grad_ = old_grad;
        loss = old_loss;
      }
    }
    model_.step_size_ = alpha;
  }

  // EstimateOptions::zero_below_sigmas: from the fitted mu, for every group
  // of two or more attributes and every pair of its attributes, marks the
  // host clique's cells whose fitted count on that pair is below `threshold`
  // (zero_below_sigmas times the smallest sigma), unless that would mark the
  // whole pair table. Fit then keeps the marked cells at 0. Reads the model
  // only (post-processing).
  // Pairs holding attribute `exempt` (-1: none) are left alone
  // (EstimateOptions::zero_exempt_attribute).
  void ZeroPairCellsBelow(double threshold, int exempt) {
    const int m = static_cast<int>(model_.cliques_.size());
    zeroed_.assign(m, {});
    const std::vector<Eigen::VectorXd>& mu = model_.mu_;
    if (static_cast<int>(mu.size()) != m) return;
    const std::vector<int>& ds = model_.domain_sizes_;
    for (const Group& g : groups_) {
      const std::vector<int>& host = model_.cliques_[g.host];
      for (size_t a = 0; a < g.vars.size(); ++a) {
        for (size_t b = a + 1; b < g.vars.size(); ++b) {
          if (g.vars[a] == exempt || g.vars[b] == exempt) continue;
          const std::vector<int> pair = {g.vars[a], g.vars[b]};
          const std::vector<int64_t> to_pair = SubStrides(host, pair, ds);
          Eigen::VectorXd fitted = Eigen::VectorXd::Zero(TableCells(pair, ds));
          double* f = fitted.data();
          const double* h = mu[g.host].data();
          ForEachCell<1>(shapes_[g.host], {&to_pair},
                         [&](int64_t cell, const std::array<int64_t, 1>& i) { f[i[0]] += h[cell]; });
          const Eigen::Array<bool, Eigen::Dynamic, 1> below = fitted.array() < threshold;
          if (below.all() || !below.any()) continue;
          std::vector<char>& zeroed = zeroed_[g.host];
          if (zeroed.empty()) zeroed.assign(mu[g.host].size(), 0);
          ForEachCell<1>(shapes_[g.host], {&to_pair},
                         [&](int64_t cell, const std::array<int64_t, 1>& i) {
                           if (below[i[0]]) zeroed[cell] = 1;
                         });
        }
      }
    }
  }

 private:
  void ApplyZeros(std::vector<Eigen::VectorXd>* theta) const {
    for (size_t c = 0; c < zeroed_.size(); ++c) {
      const std::vector<char>& zeroed = zeroed_[c];
      for (size_t i = 0; i < zeroed.size(); ++i) {
        if (zeroed[i]) (*theta)[c][static_cast<Eigen::Index>(i)] = kZeroedLogPotential;
      }
    }
  }

  GraphicalModel& model_;
  std::vector<Group> groups_;
  std::vector<std::vector<int>> shapes_;
  std::vector<std::vector<int64_t>> to_parent_sep_;  // clique c's axes -> sep(c, parent)
  std::vector<std::vector<int64_t>> parent_to_sep_;  // parent's axes -> sep(c, parent)
  std::vector<Eigen::VectorXd> up_, down_, max_scratch_;  // indexed by child clique
  std::vector<std::vector<int>> children_;
  std::vector<Eigen::VectorXd> partial_, grad_;
  Eigen::VectorXd exp_scratch_;  // as large as the largest clique
  std::vector<std::vector<char>> zeroed_;  // per clique: cells fixed at 0 (or empty)
};

absl::StatusOr<GraphicalModel> GraphicalModel::Estimate(
    const std::vector<int>& domain_sizes, const std::vector<release::NoisyMarginal>& measurements,
    const EstimateOptions& options) {
  const int n = static_cast<int>(domain_sizes.size());
  if (n == 0) return absl::InvalidArgumentError("pgm::Estimate: the domain has no attributes");
  for (int a = 0; a < n; ++a) {
    if (domain_sizes[a] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("pgm::Estimate: attribute ", a, " has domain size ", domain_sizes[a],
                       "; every domain size must be at least 1"));
    }
  }
  std::vector<std::vector<int>> sets;
  for (size_t i = 0; i < measurements.size(); ++i) {
    const release::NoisyMarginal& m = measurements[i];
    if (m.clique.empty() || m.shape.size() != m.clique.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pgm::Estimate: measurement ", i, " has an empty clique or a shape of another length"));
    }
    std::vector<int> sorted = m.clique;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() < 0 || sorted.back() >= n ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pgm::Estimate: measurement ", i, "'s clique repeats an attribute or leaves [0, ", n,
          ")"));
    }
    for (size_t k = 0; k < m.clique.size(); ++k) {
      if (m.shape[k] != domain_sizes[m.clique[k]]) {
        return absl::InvalidArgumentError(
            absl::StrCat("pgm::Estimate: measurement ", i, "'s shape does not match attribute ",
                         m.clique[k], "'s domain size ", domain_sizes[m.clique[k]]));
      }
    }
    if (m.counts.size() != TableCells(m.clique, domain_sizes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pgm::Estimate: measurement ", i, " has ", m.counts.size(), " counts, its shape ",
          TableCells(m.clique, domain_sizes)));
    }
    sets.push_back(std::move(sorted));
  }
  JunctionTree tree = BuildJunctionTree(domain_sizes, sets);
  int64_t cells = 0;
  for (const std::vector<int>& c : tree.cliques) {
    cells = SaturatingAdd(cells, TableCells(c, domain_sizes));
  }
  if (cells > options.max_cells) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pgm::Estimate: the junction tree has ", cells,
                     " cells, over the limit of ", options.max_cells));
  }

  // Sigmas are public: a non-positive or non-finite one reads as the
  // smallest valid sigma. Weights are relative to it, so they lie in (0, 1].
  double sigma_min = std::numeric_limits<double>::infinity();
  for (const release::NoisyMarginal& m : measurements) {
    if (std::isfinite(m.noise_std) && m.noise_std > 0.0) sigma_min = std::min(sigma_min, m.noise_std);
  }
  if (!std::isfinite(sigma_min)) sigma_min = 1.0;
  auto sigma_of = [&](const release::NoisyMarginal& m) {
    return std::isfinite(m.noise_std) && m.noise_std > 0.0 ? m.noise_std : sigma_min;
  };

  // Merge measurements of one attribute set (inverse-variance average, in
  // ascending attribute layout) and estimate the total the same way from
  // each measurement's sum (variance sigma^2 * cells).
  std::map<std::vector<int>, Estimator::Group> merged;
  double total_num = 0.0;
  double total_den = 0.0;
  for (size_t i = 0; i < measurements.size(); ++i) {
    const release::NoisyMarginal& m = measurements[i];
    const double rel = sigma_of(m) / sigma_min;
    const double w = 1.0 / (rel * rel);
    Estimator::Group& g = merged[sets[i]];
    if (g.vars.empty()) {
      g.vars = sets[i];
      g.y = Eigen::VectorXd::Zero(m.counts.size());
    }
    // y in ascending layout: out[cell over sorted] = counts[index in given order].
    const std::vector<int> shape = ShapeOf(g.vars, domain_sizes);
    const std::vector<int64_t> strides = SubStrides(g.vars, m.clique, domain_sizes);
    double sum = 0.0;
    ForEachCell<1>(shape, {&strides}, [&](int64_t cell, const std::array<int64_t, 1>& s) {
      double y = m.counts[s[0]];
      y = std::isnan(y) ? 0.0 : std::clamp(y, -kMaxCount, kMaxCount);
      g.y[cell] += w * y;
      sum += y;
    });
    g.weight += w;
    const double sum_w = w / static_cast<double>(m.counts.size());
    total_num += sum_w * sum;
    total_den += sum_w;
  }

  GraphicalModel model;
  model.domain_sizes_ = domain_sizes;
  model.cliques_ = std::move(tree.cliques);
  model.parents_ = std::move(tree.parents);
  model.cells_ = cells;
  model.total_ = total_den > 0.0 ? std::clamp(total_num / total_den, 1.0, kMaxCount) : 1.0;
  if (!std::isfinite(model.total_)) model.total_ = 1.0;

  std::vector<Estimator::Group> groups;
  for (auto& [vars, g] : merged) {
    if (!(g.weight > 0.0)) continue;
    g.y /= g.weight;
    int best = -1;
    for (int c = 0; c < static_cast<int>(model.cliques_.size()); ++c) {
      if (IsSubset(vars, model.cliques_[c]) &&
          (best < 0 || TableCells(model.cliques_[c], domain_sizes) <
                           TableCells(model.cliques_[best], domain_sizes))) {
        best = c;
      }
    }
    g.host = best;
    groups.push_back(std::move(g));
  }

  // Theta: zero (uniform), or the warm start's potentials, each added into a
  // new clique containing its scope (the same distribution, exactly).
  const int m = static_cast<int>(model.cliques_.size());
  model.theta_.resize(m);
  for (int c = 0; c < m; ++c) model.theta_[c] = Eigen::VectorXd::Zero(TableCells(model.cliques_[c], domain_sizes));
  double weight_sum = 0.0;
  for (const Estimator::Group& g : groups) weight_sum += g.weight;
  // A step that moves theta by O(1) where a cell holds all the mass.
  model.step_size_ = 1.0 / (4.0 * model.total_ * std::max(weight_sum, 1e-300));
  const GraphicalModel* warm = options.warm_start;
  if (warm != nullptr && warm->domain_sizes_ == domain_sizes) {
    std::vector<int> hosts;
    for (const std::vector<int>& old : warm->cliques_) {
      int host = -1;
      for (int c = 0; c < m && host < 0; ++c) {
        if (IsSubset(old, model.cliques_[c])) host = c;
      }
      if (host < 0) break;
      hosts.push_back(host);
    }
    if (hosts.size() == warm->cliques_.size()) {
      for (size_t k = 0; k < hosts.size(); ++k) {
        const std::vector<int64_t> strides =
            SubStrides(model.cliques_[hosts[k]], warm->cliques_[k], domain_sizes);
        AddBroadcast(warm->theta_[k], ShapeOf(model.cliques_[hosts[k]], domain_sizes), strides,
                     &model.theta_[hosts[k]]);
      }
      if (warm->step_size_ > 0.0 && std::isfinite(warm->step_size_)) {
        model.step_size_ = warm->step_size_ * warm->total_ / model.total_;
      }
    }
  }
  Estimator estimator(&model, std::move(groups));
  estimator.Fit(std::max(options.iterations, 0));
  if (options.zero_below_sigmas > 0.0 && std::isfinite(options.zero_below_sigmas)) {
    estimator.ZeroPairCellsBelow(options.zero_below_sigmas * sigma_min,
                                 options.zero_exempt_attribute);
    estimator.Fit(std::max(options.zero_refit_iterations, 0));
  }
  return model;
}

namespace {

// A table over ascending attributes `vars`.
struct Factor {
  std::vector<int> vars;
  Eigen::VectorXd values;
};

// Sums `f` down to the attributes `keep` (ascending, a subset of f.vars).
Factor SumTo(const Factor& f, const std::vector<int>& keep, const std::vector<int>& ds) {
  Factor out{keep, Eigen::VectorXd::Zero(TableCells(keep, ds))};
  const std::vector<int64_t> strides = SubStrides(f.vars, keep, ds);
  double* o = out.values.data();
  const double* v = f.values.data();
  ForEachCell<1>(ShapeOf(f.vars, ds), {&strides},
                 [&](int64_t cell, const std::array<int64_t, 1>& s) { o[s[0]] += v[cell]; });
  return out;
}

// Pointwise product over the union of the attributes.
Factor Product(const Factor& a, const Factor& b, const std::vector<int>& ds) {
  Factor out{SortedUnion(a.vars, b.vars), {}};
  out.values.resize(TableCells(out.vars, ds));
  const std::vector<int64_t> sa = SubStrides(out.vars, a.vars, ds);
  const std::vector<int64_t> sb = SubStrides(out.vars, b.vars, ds);
  double* o = out.values.data();
  const double* va = a.values.data();
  const double* vb = b.values.data();
  ForEachCell<2>(ShapeOf(out.vars, ds), {&sa, &sb},
                 [&](int64_t cell, const std::array<int64_t, 2>& s) {
                   o[cell] = va[s[0]] * vb[s[1]];
                 });
  return out;
}

}  // namespace

Eigen::VectorXd GraphicalModel::Marginal(const std::vector<int>& clique) const {
  const int n = static_cast<int>(domain_sizes_.size());
  std::vector<int> query = clique;
  std::sort(query.begin(), query.end());
  if (query.empty() || query.front() < 0 || query.back() >= n ||
      std::adjacent_find(query.begin(), query.end()) != query.end()) {
    return Eigen::VectorXd();
  }
  const int m = static_cast<int>(cliques_.size());
  Factor result;
  int host = -1;
  for (int c = 0; c < m; ++c) {
    if (IsSubset(query, cliques_[c]) &&
        (host < 0 || mu_[c].size() < mu_[host].size())) {
      host = c;
    }
  }
  if (host >= 0) {
    result = SumTo(Factor{cliques_[host], mu_[host]}, query, domain_sizes_);
  } else {
    // A subtree holding every query attribute: an anchor clique (most query
    // attributes, then fewest cells), for each attribute it lacks the
    // clique holding it nearest the anchor, and the tree paths between them.
    std::vector<int> depth(m, 0);
    for (int c = 1; c < m; ++c) depth[c] = depth[parents_[c]] + 1;
    auto overlap = [&](int c) {
      return static_cast<int>(SortedIntersection(cliques_[c], query).size());
    };
    int anchor = 0;
    for (int c = 1; c < m; ++c) {
      if (overlap(c) > overlap(anchor) ||
          (overlap(c) == overlap(anchor) && mu_[c].size() < mu_[anchor].size())) {
        anchor = c;
      }
    }
    // Marks the path between x and y; returns its length.
    std::vector<char> in_tree(m, 0);
    auto path = [&](int x, int y, bool mark) {
      int length = 0;
      while (x != y) {
        if (mark) in_tree[x] = in_tree[y] = 1;
        if (depth[x] >= depth[y]) {
          x = parents_[x];
        } else {
          y = parents_[y];
        }
        ++length;
      }
      if (mark) in_tree[x] = 1;
      return length;
    };
    in_tree[anchor] = 1;
    for (int v : query) {
      if (std::binary_search(cliques_[anchor].begin(), cliques_[anchor].end(), v)) continue;
      int best = -1;
      int best_length = 0;
      for (int c = 0; c < m; ++c) {
        if (!std::binary_search(cliques_[c].begin(), cliques_[c].end(), v)) continue;
        const int length = path(anchor, c, false);
        if (best < 0 || length < best_length) {
          best = c;
          best_length = length;
        }
      }
      path(anchor, best, true);
    }
    // The subtree's top (its least deep clique; a junction tree's subtree is
    // connected, so it is unique) gets p(C); every other clique p(C \ S | S).
    int top = anchor;
    for (int c = 0; c < m; ++c) {
      if (in_tree[c] && depth[c] < depth[top]) top = c;
    }
    // Variable elimination upward, one fused pass per clique over (its
    // attributes and its children's messages'): out[keep] += mu_C / mu_S *
    // prod messages, keep = (separator and query attributes).
    std::vector<Factor> message(m);
    for (int c = m - 1; c >= top; --c) {
      if (!in_tree[c]) continue;
      Factor children{{}, Eigen::VectorXd::Ones(1)};
      for (int k = c + 1; k < m; ++k) {
        if (parents_[k] == c && in_tree[k]) children = Product(children, message[k], domain_sizes_);
      }
      std::vector<int> sep;
      Eigen::VectorXd inverse_sep = Eigen::VectorXd::Ones(1);
      if (c != top) {
        sep = SortedIntersection(cliques_[c], cliques_[parents_[c]]);
        // 1 / p(S), 0 where p(S) = 0 (its cells are 0 as well) or so small
        // (a cell fixed at 0 can leave a subnormal) that 1 / p(S) is inf,
        // which times a 0 cell would be NaN.
        inverse_sep = SumTo(Factor{cliques_[c], mu_[c]}, sep, domain_sizes_).values;
        for (Eigen::Index i = 0; i < inverse_sep.size(); ++i) {
          const double inverse = inverse_sep[i] > 0.0 ? total_ / inverse_sep[i] : 0.0;
          inverse_sep[i] = std::isfinite(inverse) ? inverse : 0.0;
        }
      }
      const std::vector<int> vars = SortedUnion(cliques_[c], children.vars);
      std::vector<int> keep;
      for (int v : vars) {
        if (std::binary_search(sep.begin(), sep.end(), v) ||
            std::binary_search(query.begin(), query.end(), v)) {
          keep.push_back(v);
        }
      }
      Factor out{keep, Eigen::VectorXd::Zero(TableCells(keep, domain_sizes_))};
      const std::vector<int64_t> s_clique = SubStrides(vars, cliques_[c], domain_sizes_);
      const std::vector<int64_t> s_sep = SubStrides(vars, sep, domain_sizes_);
      const std::vector<int64_t> s_children = SubStrides(vars, children.vars, domain_sizes_);
      const std::vector<int64_t> s_keep = SubStrides(vars, keep, domain_sizes_);
      const double* mu = mu_[c].data();
      const double* inv = inverse_sep.data();
      const double* msg = children.values.data();
      double* o = out.values.data();
      const double scale = 1.0 / total_;
      ForEachCell<4>(ShapeOf(vars, domain_sizes_), {&s_clique, &s_sep, &s_children, &s_keep},
                     [&](int64_t, const std::array<int64_t, 4>& i) {
                       o[i[3]] += mu[i[0]] * scale * inv[i[1]] * msg[i[2]];
                     });
      if (c == top) {
        result = std::move(out);
        break;
      }
      message[c] = std::move(out);
    }
    result.values *= total_;
  }
  // Reorder from ascending attributes to the caller's order.
  Eigen::VectorXd out(result.values.size());
  const std::vector<int64_t> strides = SubStrides(clique, result.vars, domain_sizes_);
  const double* v = result.values.data();
  ForEachCell<1>(ShapeOf(clique, domain_sizes_), {&strides},
                 [&](int64_t cell, const std::array<int64_t, 1>& s) { out[cell] = v[s[0]]; });
  return out;
}

absl::StatusOr<GraphicalModel> GraphicalModel::FromParts(
    std::vector<int> domain_sizes, std::vector<std::vector<int>> cliques,
    std::vector<int> parents, std::vector<Eigen::VectorXd> clique_marginals) {
  const int n = static_cast<int>(domain_sizes.size());
  const int m = static_cast<int>(cliques.size());
  const absl::Status bad = absl::InvalidArgumentError(
      "the graphical model's parts do not fit together (cliques, parents, marginals, domain)");
  if (n == 0 || m == 0 || static_cast<int>(parents.size()) != m ||
      static_cast<int>(clique_marginals.size()) != m) {
    return bad;
  }
  for (int size : domain_sizes) {
    if (size < 1) return bad;
  }
  std::vector<bool> covered(n, false);
  int64_t cells = 0;
  for (int c = 0; c < m; ++c) {
    const std::vector<int>& clique = cliques[c];
    if (clique.empty() || !std::is_sorted(clique.begin(), clique.end()) ||
        std::adjacent_find(clique.begin(), clique.end()) != clique.end() ||
        clique.front() < 0 || clique.back() >= n) {
      return bad;
    }
    if ((c == 0) != (parents[c] == -1) || (c > 0 && (parents[c] < 0 || parents[c] >= c))) {
      return bad;
    }
    const int64_t clique_cells = TableCells(clique, domain_sizes);
    if (clique_marginals[c].size() != clique_cells || !clique_marginals[c].allFinite()) {
      return bad;
    }
    cells += clique_cells;
    for (int v : clique) covered[v] = true;
  }
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) return bad;
  GraphicalModel model;
  model.domain_sizes_ = std::move(domain_sizes);
  model.cliques_ = std::move(cliques);
  model.parents_ = std::move(parents);
  model.mu_ = std::move(clique_marginals);
  model.total_ = std::clamp(model.mu_[0].sum(), 1.0, 1e15);
  model.cells_ = cells;
  return model;
}

Eigen::MatrixXi GraphicalModel::Sample(int64_t num_rows, uint64_t seed) const {
  const int n = static_cast<int>(domain_sizes_.size());
  const int64_t rows = std::max<int64_t>(num_rows, 0);
  Eigen::MatrixXi codes(rows, n);
  if (rows == 0) return codes;
  // Per clique: the attributes it adds (not in its parent's separator), the
  // separator's strides in the clique's table, and a cumulative table with
  // one row per separator cell over the added attributes' cells.
  struct Step {
    std::vector<int> sep, added;
    std::vector<int> added_shape;
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> cumulative;
    std::vector<int64_t> sep_strides;  // per sep attribute, in the sep table
  };
  const int m = static_cast<int>(cliques_.size());
  std::vector<Step> steps(m);
  for (int c = 0; c < m; ++c) {
    Step& s = steps[c];
    if (parents_[c] >= 0) s.sep = SortedIntersection(cliques_[c], cliques_[parents_[c]]);
    for (int v : cliques_[c]) {
      if (!std::binary_search(s.sep.begin(), s.sep.end(), v)) s.added.push_back(v);
    }
    s.added_shape = ShapeOf(s.added, domain_sizes_);
    const int64_t sep_cells = TableCells(s.sep, domain_sizes_);
    const int64_t added_cells = TableCells(s.added, domain_sizes_);
    s.cumulative.setZero(sep_cells, added_cells);
    const std::vector<int> shape = ShapeOf(cliques_[c], domain_sizes_);
    const std::vector<int64_t> to_sep = SubStrides(cliques_[c], s.sep, domain_sizes_);
    const std::vector<int64_t> to_added = SubStrides(cliques_[c], s.added, domain_sizes_);
    const double* mu = mu_[c].data();
    ForEachCell<2>(shape, {&to_sep, &to_added}, [&](int64_t cell, const std::array<int64_t, 2>& i) {
      s.cumulative(i[0], i[1]) = std::max(mu[cell], 0.0);
    });
    for (Eigen::Index r = 0; r < sep_cells; ++r) {
      // A separator value of probability 0 is never drawn; uniform keeps it defined.
      if (!(s.cumulative.row(r).sum() > 0.0)) s.cumulative.row(r).setOnes();
      for (Eigen::Index k = 1; k < added_cells; ++k) s.cumulative(r, k) += s.cumulative(r, k - 1);
    }
    s.sep_strides = SubStrides(s.sep, s.sep, domain_sizes_);
  }
  PublicRng rng(seed);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < m; ++c) {
      const Step& s = steps[c];
      if (s.added.empty()) continue;
      int64_t sep_index = 0;
      for (size_t k = 0; k < s.sep.size(); ++k) sep_index += codes(r, s.sep[k]) * s.sep_strides[k];
      const double* begin = s.cumulative.row(sep_index).data();
      const double* end = begin + s.cumulative.cols();
      const double u = rng.Uniform() * end[-1];
      int64_t cell = std::upper_bound(begin, end, u) - begin;
      cell = std::min<int64_t>(cell, s.cumulative.cols() - 1);
      for (int k = static_cast<int>(s.added.size()) - 1; k >= 0; --k) {
        codes(r, s.added[k]) = static_cast<int>(cell % s.added_shape[k]);
        cell /= s.added_shape[k];
      }
    }
  }
  return codes;
}

}  // namespace dpcurator::pgm
