// DLH — a folder that belongs to its user, on storage other users share (issue 41).
//
// Node-local storage (/tmp, /local/scratch) is shared by every user of a node. A folder
// another user owns, or can write, or can rename away (because they may write a folder above
// it that lacks the sticky bit), lets them plant or replace what the job reads: a data set,
// the record that says it is current, a symbolic link where a file will be written. So a
// folder is taken only when it is owned by the user, writable by no one else, and every
// folder above it is owned by the user or root and, where others may write it, sticky (as
// /tmp is); a symbolic link on the way must be the user's or root's. The check follows the
// path as written and the path it resolves to.
#pragma once

#include <string>

namespace dlh {

// Creates the missing folders of `dir` (mode 0700), then checks it as above. Returns `dir`
// made absolute. Throws DataError with one line naming the folder and the reason ("owned by
// user 'mallory' (uid 1001), not by you", "writable by others (mode 0777)"); `what` names
// the folder's use in it ("staging folder").
std::string OwnedFolder(const std::string& dir, const std::string& what);

// The name of user `uid`, or its number where it has none.
std::string UserName(unsigned uid);

}  // namespace dlh
