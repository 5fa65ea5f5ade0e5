// DLH — a folder that belongs to its user (see owned_folder.hpp).
#include "launcher/data/owned_folder.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.hpp"

namespace fs = std::filesystem;

namespace dlh {
namespace {

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

std::string Owner(uid_t uid) {
  return "user '" + UserName(uid) + "' (uid " + std::to_string(uid) + ")";
}

// "/a/b/c" -> "/a", "/a/b", "/a/b/c".
std::vector<std::string> Prefixes(const fs::path& path) {
  std::vector<std::string> out;
  fs::path at;
  for (const fs::path& part : path) {
    at /= part;
    if (part != "/" && !part.empty()) out.push_back(at.string());
  }
  return out;
}

[[noreturn]] void Refuse(const std::string& folder, const std::string& role,
                         const std::string& why) {
  throw DataError(folder + ": refused as " + role + ": " + why);
}

// A folder above the one taken: nobody but the user or root may replace what is in it.
void CheckAbove(const std::string& p, const struct stat& st, const std::string& what) {
  const uid_t me = geteuid();
  const std::string role = "a folder above the " + what;
  if (st.st_uid != me && st.st_uid != 0)
    Refuse(p, role, "owned by " + Owner(st.st_uid) + ", neither you nor root");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    Refuse(p, role,
           "writable by others without the sticky bit (mode " + Mode(st.st_mode) +
               "), so they could replace the " + what + " inside it");
}

// The folder itself: the user's, and nobody else's to write.
void CheckTaken(const std::string& p, const struct stat& st, const std::string& what) {
  const uid_t me = geteuid();
  if (!S_ISDIR(st.st_mode)) Refuse(p, "the " + what, "not a folder");
  if (st.st_uid != me)
    Refuse(p, "the " + what,
           "owned by " + Owner(st.st_uid) + ", not by you (" + UserName(me) + ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    Refuse(p, "the " + what, "writable by others (mode " + Mode(st.st_mode) + "): chmod go-w " + p);
}

}  // namespace

std::string UserName(unsigned uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid_t(uid), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_name &&
      *found->pw_name)
    return found->pw_name;
  return std::to_string(uid);
}

std::string OwnedFolder(const std::string& dir, const std::string& what) {
  if (dir.empty()) throw DataError("the " + what + " is empty");
  const fs::path absolute = fs::absolute(dir).lexically_normal();
  std::string path = absolute.string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const uid_t me = geteuid();

  // The path as written: each folder created when missing, checked as it is passed.
  const std::vector<std::string> parts = Prefixes(fs::path(path));
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) throw DataError(p + ": cannot read: " + std::strerror(errno));
      if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
        throw DataError(p + ": cannot create the " + what + ": " + std::strerror(errno));
      if (lstat(p.c_str(), &st) != 0) throw DataError(p + ": cannot read: " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      // A link may be swapped by whoever owns it; the user's or root's cannot.
      if (st.st_uid != me && st.st_uid != 0)
        Refuse(p, last ? "the " + what : "a folder above the " + what,
               "a symbolic link owned by " + Owner(st.st_uid));
      if (last) Refuse(p, "the " + what, "a symbolic link: name the folder it leads to");
      continue;  // where it leads is checked below, on the resolved path
    }
    if (last)
      CheckTaken(p, st, what);
    else if (!S_ISDIR(st.st_mode))
      throw DataError(p + ": not a folder");
    else
      CheckAbove(p, st, what);
  }

  // The path it resolves to, where a link on the way leads elsewhere.
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved))
    throw DataError(path + ": cannot resolve: " + std::strerror(errno));
  const std::vector<std::string> real = Prefixes(fs::path(resolved));
  for (size_t i = 0; i < real.size(); ++i) {
    struct stat st {};
    if (stat(real[i].c_str(), &st) != 0)
      throw DataError(real[i] + ": cannot read: " + std::strerror(errno));
    if (i + 1 == real.size())
      CheckTaken(real[i], st, what);
    else
      CheckAbove(real[i], st, what);
  }
  return path;
}

}  // namespace dlh
