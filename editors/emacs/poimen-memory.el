;;; poimen-memory.el --- Agent memories anchored to code -*- lexical-binding: t; -*-

;; Author: poimen-memory contributors
;; Version: 0.1.0
;; Package-Requires: ((emacs "27.1") (jsonrpc "1.0.14"))
;; Keywords: tools, vc, convenience
;; SPDX-License-Identifier: MIT

;;; Commentary:

;; poimen-memory keeps what coding agents learned in their sessions as
;; memories and ties the evidence to code through git blame.  Its language
;; server is `mem lsp'.  This file offers:
;;
;; - `poimen-memory-eglot-setup': make Eglot run `mem lsp' (with the settings
;;   in `poimen-memory-settings' as initializationOptions) for the major modes
;;   in `poimen-memory-modes', so that hovering (eldoc) a line shows its
;;   memories.  Eglot runs one server per buffer: a mode listed there uses
;;   poimen-memory instead of its language server.
;;
;; - Commands that work in any buffer of a git work tree, with or without
;;   Eglot: `poimen-memory-by-commit', `poimen-memory-by-author',
;;   `poimen-memory-query', `poimen-memory-here' (the cursor line or the
;;   region) and `poimen-memory-refresh'.  They run the server's commands
;;   (workspace/executeCommand) on the buffer's Eglot server when that is
;;   poimen-memory, else on a server of their own for the work tree, and show
;;   the memories in the *poimen-memory* buffer, each citation a button that
;;   visits the cited line.
;;
;; Setup:
;;
;;   (add-to-list 'load-path "/path/to/poimen-memory/editors/emacs")
;;   (require 'poimen-memory)
;;   (setq poimen-memory-settings '(:project "demo"))
;;   (poimen-memory-eglot-setup)   ; optional: Eglot for `poimen-memory-modes'
;;   (global-set-key (kbd "C-c m h") #'poimen-memory-here)

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'seq)
(require 'subr-x)
(require 'url-util)

(defvar eglot-server-programs)
(declare-function eglot-current-server "eglot" ())
(declare-function eglot--capabilities "eglot" (server) t)
(declare-function eglot--project "eglot" (server) t)
(declare-function project-root "project" (project))

(defgroup poimen-memory nil
  "Memories of coding-agent sessions, anchored to code through git."
  :group 'tools
  :prefix "poimen-memory-")

(defcustom poimen-memory-command '("mem" "lsp")
  "The command that starts the language server, a list of strings.
With a virtual environment:
  (\"/path/venv/bin/python\" \"-m\" \"poimen_memory.cli\" \"lsp\")."
  :type '(repeat string))

(defcustom poimen-memory-settings nil
  "Server settings: a plist sent as initializationOptions under poimenMemory.
For example (:project \"demo\" :hover (:excerptLength 800)
:codeLens (:enabled :json-false)).  Keys: :dsn, :project, :repo,
:hover (:enabled :excerptLength :markup :history),
:codeLens (:enabled :fileSummary),
:blame (:maxFileBytes :maxFileLines :detectMoves :sharedCache)
and :logLevel.
Write false as :json-false."
  :type '(plist :key-type symbol :value-type sexp))

(defcustom poimen-memory-modes '(prog-mode text-mode)
  "Major modes for which `poimen-memory-eglot-setup' has Eglot run the server."
  :type '(repeat symbol))

(defcustom poimen-memory-timeout 30
  "Seconds to wait for the server's answer to a command."
  :type 'integer)

(defconst poimen-memory-server-commands
  '((by-git . "mem.byGit")
    (by-commit . "mem.byCommit")
    (by-author . "mem.byAuthor")
    (query . "mem.query")
    (show-memories . "mem.showMemories")
    (refresh . "mem.refresh")
    (ping . "mem.ping")
    (remember . "mem.remember")
    (why . "mem.why")
    (blame . "mem.blame")
    (status . "mem.status")
    (resolve-pending . "mem.resolvePending"))
  "The server's command ids (server/poimen_memory/lsp/commands.py).")

(defconst poimen-memory-buffer-name "*poimen-memory*"
  "The buffer the commands show their results in.")

(defvar poimen-memory--connections (make-hash-table :test #'equal)
  "Work tree root -> the connection of a server the commands started.")

(defvar poimen-memory-last-connection nil
  "The connection the last command ran on (an Eglot server or one of our own).")

(defun poimen-memory--command-id (name)
  "The server command id of NAME, a symbol of `poimen-memory-server-commands'."
  (or (alist-get name poimen-memory-server-commands)
      (error "Unknown poimen-memory command %s" name)))

;;;; Settings and Eglot

(defun poimen-memory-initialization-options (&optional _server)
  "The initializationOptions: `poimen-memory-settings' under :poimenMemory."
  (and poimen-memory-settings (list :poimenMemory poimen-memory-settings)))

(defun poimen-memory-eglot-contact ()
  "The Eglot contact that runs the server with the settings."
  (append poimen-memory-command
          (list :initializationOptions #'poimen-memory-initialization-options)))

;;;###autoload
(defun poimen-memory-eglot-setup ()
  "Make Eglot run poimen-memory for the major modes in `poimen-memory-modes'."
  (interactive)
  (require 'eglot)
  (setq eglot-server-programs
        (cons (cons poimen-memory-modes (poimen-memory-eglot-contact))
              (cl-remove-if
               (lambda (entry) (equal (car entry) poimen-memory-modes))
               eglot-server-programs))))

(defun poimen-memory--eglot-server ()
  "The buffer's Eglot server when it is poimen-memory, else nil."
  (when (and (featurep 'eglot) (fboundp 'eglot-current-server))
    (let ((server (ignore-errors (eglot-current-server))))
      (when (and server (fboundp 'eglot--capabilities))
        (let* ((provider (plist-get (eglot--capabilities server)
                                    :executeCommandProvider))
               (commands (and (listp provider)
                              (plist-get provider :commands))))
          (and commands
               (seq-contains-p commands (poimen-memory--command-id 'by-commit))
               server))))))

;;;; A server of our own

(defun poimen-memory--root (&optional dir)
  "The root of the git work tree holding DIR (or `default-directory'), or nil."
  (let ((found (locate-dominating-file (or dir default-directory) ".git")))
    (and found (file-name-as-directory (expand-file-name found)))))

(defun poimen-memory--uri (path)
  "The file URI of PATH."
  (concat "file://"
          (url-hexify-string (expand-file-name path) url-path-allowed-chars)))

(defun poimen-memory--notify (_conn method params)
  "Handle the server's notification METHOD with PARAMS."
  (pcase method
    ('window/showMessage
     (message "poimen-memory: %s" (plist-get params :message)))
    (_ nil)))

(defun poimen-memory--request (_conn method params)
  "Answer the server's request METHOD with PARAMS."
  (pcase method
    ('workspace/configuration
     (apply #'vector
            (mapcar (lambda (item)
                      (and (equal (plist-get item :section) "poimenMemory")
                           poimen-memory-settings))
                    (plist-get params :items))))
    ('window/workDoneProgress/create nil)
    ('workspace/codeLens/refresh nil)
    ('window/showDocument (list :success :json-false))
    (_ (signal 'jsonrpc-error
               `((jsonrpc-error-code . -32601)
                 (jsonrpc-error-message
                  . ,(format "unsupported: %s" method)))))))

(defun poimen-memory--connect (root)
  "Start and initialize a server for the work tree ROOT; return the connection."
  (unless (executable-find (car poimen-memory-command))
    (user-error "poimen-memory: %s is not executable; %s"
                (car poimen-memory-command) "set `poimen-memory-command'"))
  (let* ((name (format "poimen-memory %s" (abbreviate-file-name root)))
         (default-directory root)
         (process (make-process
                   :name name
                   :command poimen-memory-command
                   :connection-type 'pipe
                   :coding 'utf-8-emacs-unix
                   :noquery t
                   ;; jsonrpc reads stderr from a buffer of exactly this name.
                   :stderr (get-buffer-create (format "*%s stderr*" name))))
         (conn (make-instance
                'jsonrpc-process-connection
                :name name
                :process process
                :events-buffer-scrollback-size 2000
                :notification-dispatcher #'poimen-memory--notify
                :request-dispatcher #'poimen-memory--request
                :on-shutdown
                (lambda (_conn) (remhash root poimen-memory--connections))))
         (uri (poimen-memory--uri root)))
    (jsonrpc-request
     conn :initialize
     (list :processId (emacs-pid)
           :clientInfo (list :name "poimen-memory.el")
           :rootUri uri
           :workspaceFolders (vector (list :uri uri :name root))
           :capabilities (list :workspace (list :configuration t))
           :initializationOptions (poimen-memory-initialization-options))
     :timeout poimen-memory-timeout)
    (jsonrpc-notify conn :initialized (make-hash-table))
    (puthash root conn poimen-memory--connections)
    conn))

(defun poimen-memory--connection ()
  "The connection for the buffer: its Eglot server, else one of our own."
  (or (poimen-memory--eglot-server)
      (let ((root (poimen-memory--root)))
        (unless root
          (user-error "poimen-memory: %s is not in a git work tree"
                      default-directory))
        (let ((conn (gethash root poimen-memory--connections)))
          (if (and conn (jsonrpc-running-p conn))
              conn
            (poimen-memory--connect root))))))

(defun poimen-memory--project-root (conn)
  "The work tree root CONN serves."
  (or (cl-loop for root being the hash-keys of poimen-memory--connections
               using (hash-values c) when (eq c conn) return root)
      (and (fboundp 'eglot--project)
           (ignore-errors (project-root (eglot--project conn))))
      (poimen-memory--root)))

;;;###autoload
(defun poimen-memory-shutdown ()
  "Stop the servers the commands started."
  (interactive)
  (maphash (lambda (_root conn) (ignore-errors (jsonrpc-shutdown conn)))
           poimen-memory--connections)
  (clrhash poimen-memory--connections))

(defun poimen-memory-execute (command argument)
  "Run the server command COMMAND (a symbol) with ARGUMENT (a plist).
Return the result."
  (let ((conn (poimen-memory--connection)))
    (setq poimen-memory-last-connection conn)
    (condition-case err
        (jsonrpc-request conn :workspace/executeCommand
                         (list :command (poimen-memory--command-id command)
                               :arguments
                               (vector (or argument (make-hash-table))))
                         :timeout poimen-memory-timeout)
      (jsonrpc-error
       (user-error "poimen-memory: %s"
                   (or (alist-get 'jsonrpc-error-message (cdr err)) err))))))

;;;; Results

(defun poimen-memory--present (value)
  "VALUE unless it is JSON null or false."
  (and value (not (eq value :json-false)) value))

(defun poimen-memory-parse-ref (ref)
  "Split REF (file:line, file:start-end or file) into (FILE START END)."
  (cond ((string-match "\\`\\(.*\\):\\([0-9]+\\)-\\([0-9]+\\)\\'" ref)
         (list (match-string 1 ref) (string-to-number (match-string 2 ref))
               (string-to-number (match-string 3 ref))))
        ((string-match "\\`\\(.*\\):\\([0-9]+\\)\\'" ref)
         (let ((n (string-to-number (match-string 2 ref))))
           (list (match-string 1 ref) n n)))
        (t (list ref nil nil))))

(defun poimen-memory-citation (node)
  "The citation of NODE's evidence, as the README writes it, or nil."
  (let ((ref (poimen-memory--present (plist-get node :git_ref)))
        (commit (poimen-memory--present (plist-get node :git_commit))))
    (when (and ref commit)
      (format "%s (commit %s) \"%s\" — %s <%s>, %s"
              ref
              (substring (plist-get commit :sha) 0 7)
              (car (split-string (plist-get commit :message) "\n"))
              (plist-get commit :author_name)
              (plist-get commit :author)
              (substring (plist-get commit :date) 0 10)))))

(defface poimen-memory-heading '((t :inherit bold :height 1.2))
  "Face of the result heading.")

(defface poimen-memory-section
  '((t :inherit font-lock-keyword-face :weight bold))
  "Face of the level sections.")

(defface poimen-memory-brief '((t :inherit bold))
  "Face of a memory's brief.")

(defvar poimen-memory-results-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'forward-button)
    (define-key map (kbd "<backtab>") #'backward-button)
    map)
  "Keymap of `poimen-memory-results-mode'.")

(define-derived-mode poimen-memory-results-mode special-mode "Memories"
  "Memories found by a poimen-memory command.
\\{poimen-memory-results-mode-map}"
  (setq-local truncate-lines nil)
  (visual-line-mode 1))

(defun poimen-memory--visit (root ref)
  "Visit REF (file:line) below ROOT."
  (pcase-let ((`(,file ,start ,_end) (poimen-memory-parse-ref ref)))
    (find-file-other-window (expand-file-name file root))
    (when start
      (goto-char (point-min))
      (forward-line (1- start)))))

(defconst poimen-memory--groups
  '(("L2" . "Synthesis (L2)") ("L1" . "Memories (L1)") ("L0" . "Evidence (L0)"))
  "Levels in the order they are shown, with their section titles.")

(defun poimen-memory-render (heading result root)
  "Insert RESULT (the response model) under HEADING.
Citations are buttons visiting the cited files below ROOT."
  (let* ((nodes (append (plist-get result :nodes) nil))
         ;; The repository, or the repositories (a list) when the memories come from several.
         (repo (let ((given (poimen-memory--present (plist-get result :repo))))
                 (if (or (vectorp given) (listp given))
                     (and (> (length given) 0) (mapconcat #'identity given ", "))
                   given)))
         (groups (copy-sequence poimen-memory--groups)))
    (insert (propertize heading 'face 'poimen-memory-heading) "\n\n")
    (insert (format "%d memor%s" (length nodes)
                    (if (= (length nodes) 1) "y" "ies"))
            (if repo (format " · %s" repo) "") "\n\n")
    (if (null nodes)
        (insert "No memories found.\n")
      (dolist (node nodes)
        (let ((level (plist-get node :level)))
          (unless (assoc level groups)
            (setq groups (append groups (list (cons level level)))))))
      (dolist (group groups)
        (let ((members (cl-remove-if-not
                        (lambda (n) (equal (plist-get n :level) (car group)))
                        nodes)))
          (when members
            (insert (propertize (cdr group) 'face 'poimen-memory-section)
                    "\n\n")
            (dolist (node members)
              (let* ((body (split-string (string-trim (plist-get node :text))
                                         "\n"))
                     (brief (or (poimen-memory--present (plist-get node :brief))
                                (car body)))
                     (ref (poimen-memory--present (plist-get node :git_ref)))
                     (cite (poimen-memory-citation node)))
                (insert (propertize brief 'face 'poimen-memory-brief) "\n")
                (when (equal (string-trim (car body)) (string-trim brief))
                  (setq body (cdr body)))
                (when (and body (not (string-empty-p
                                      (string-trim (string-join body "\n")))))
                  (insert (string-join body "\n") "\n"))
                (when cite
                  (insert "— ")
                  (insert-text-button
                   cite
                   'follow-link t
                   'help-echo (format "Visit %s" ref)
                   'action (lambda (_button) (poimen-memory--visit root ref)))
                  (insert "\n"))
                (insert "\n")))))))))

(defun poimen-memory-show (heading result root)
  "Show RESULT under HEADING in the *poimen-memory* buffer; return the buffer."
  (let ((buffer (get-buffer-create poimen-memory-buffer-name)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (poimen-memory-results-mode)
        (setq default-directory (or root default-directory))
        (poimen-memory-render heading result root)
        (goto-char (point-min))))
    (display-buffer buffer)
    buffer))

(defun poimen-memory--lookup (command argument heading)
  "Run COMMAND with ARGUMENT and show the result under HEADING."
  (let* ((result (poimen-memory-execute command argument))
         (root (poimen-memory--project-root poimen-memory-last-connection)))
    (poimen-memory-show heading result root)))

;;;; Commands

;;;###autoload
(defun poimen-memory-by-commit (sha)
  "Show the memories whose evidence is anchored in commit SHA (or a prefix)."
  (interactive
   (list (read-string "Memories of commit: " (thing-at-point 'word t))))
  (let ((sha (downcase (string-trim sha))))
    (unless (string-match-p "\\`[0-9a-f]\\{4,64\\}\\'" sha)
      (user-error "poimen-memory: a commit id is 4 to 64 hex digits, got %S"
                  sha))
    (poimen-memory--lookup 'by-commit (list :commit_sha sha)
                           (format "Memories of commit %s" sha))))

;;;###autoload
(defun poimen-memory-by-author (author)
  "Show the memories from the commits of AUTHOR (an email or a name, any case)."
  (interactive (list (read-string "Memories by author (email or name): ")))
  (let ((author (string-trim author)))
    (when (string-empty-p author)
      (user-error "poimen-memory: give an author's email or name"))
    (poimen-memory--lookup 'by-author (list :author author)
                           (format "Memories from commits by %s" author))))

;;;###autoload
(defun poimen-memory-query (text)
  "Show the memories matching TEXT (web-search syntax)."
  (interactive (list (read-string "Search memories: ")))
  (let ((text (string-trim text)))
    (when (string-empty-p text)
      (user-error "poimen-memory: give words to search for"))
    (poimen-memory--lookup 'query (list :query text)
                           (format "Memories matching %s" text))))

;;;###autoload
(defun poimen-memory-here (&optional start end)
  "Show the memories of the cursor line, or of lines START to END (the region)."
  (interactive
   (if (use-region-p) (list (region-beginning) (region-end)) (list nil nil)))
  (unless buffer-file-name
    (user-error "poimen-memory: this buffer visits no file"))
  (let* ((first (line-number-at-pos (or start (point))))
         (last (if end (line-number-at-pos (max (or start 1) (1- end))) first))
         (uri (poimen-memory--uri buffer-file-name)))
    (if (= first last)
        (poimen-memory--lookup 'by-git (list :uri uri :line first)
                               (format "Memories of line %d" first))
      (poimen-memory--lookup 'by-git (list :uri uri :lines (vector first last))
                             (format "Memories of lines %d-%d" first last)))))

;;;###autoload
(defun poimen-memory-refresh ()
  "Make the server drop its caches and refresh its lenses."
  (interactive)
  (let ((result (poimen-memory-execute 'refresh nil)))
    (message "poimen-memory: caches dropped (%s documents)"
             (plist-get result :invalidated))))

(provide 'poimen-memory)
;;; poimen-memory.el ends here
